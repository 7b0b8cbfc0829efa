"""Records of billing in the job store: billed calls, stored answers, the budget's state.

The job store keeps, per job, an exactly-once ledger (each billed call counted once, by
its call id), the answers of gateway calls under their idempotency keys (so a call that
runs again reuses its answer), and a budget: a cap, the cost spent so far, and the cost
reserved by calls in flight. Amounts are integer nano-USD (swarm.cost.pricing).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from swarm.records import Frozen, ToolCall, Usage
from swarm.store.companion import Companion
from swarm.store.leases import Lease


class StoredAnswer(Frozen):
    """A gateway's answer kept under its idempotency key."""

    content: str
    """The answer's text."""
    usage: Usage
    """Tokens that answer billed."""
    reasoning: str = ""
    """The answer's reasoning_content (a replayed agent step sends it back with its tool
    calls, so the step after it has the request, and key, it had)."""
    finish_reason: str | None = None
    """The gateway's finish_reason."""
    usage_missing: bool = False
    """True when the answer had no usage field."""
    attempts: int = 1
    """Attempts it took (the answered one included)."""
    latency_ms: int = 0
    """Wall time from the first attempt to the answer."""
    tool_calls: tuple[ToolCall, ...] = ()
    """Tools the answer asked to call."""
    max_tokens_sent: int | None = None
    """The smaller max_tokens its request was sent with (pacing); None: as asked."""
    via: Literal["live", "batch"] = "live"
    """``batch`` for a line of a batch's output file (swarm.batch.ingest)."""


class BilledCall(Frozen):
    """One HTTP response the gateway billed, to count once in the job's ledger."""

    call_id: str
    """Unique per response; recording the same id twice counts it once."""
    model: str
    """Catalog name of the model that billed it."""
    usage: Usage
    """Its usage field."""
    cost_nusd: int
    """Its cost at the catalog's prices (cached input at the cached price), in nano-USD."""
    answer_key: str | None = None
    """Idempotency key to store ``answer`` under (first answer wins); None for none."""
    answer: StoredAnswer | None = None
    """The usable answer of this response, if it had one."""


class LedgerLine(Frozen):
    """Billed calls of one model in one job."""

    calls: int = 0
    """Calls the gateway answered (and billed)."""
    usage: Usage = Usage()
    """Their summed usage."""


class BudgetState(Frozen):
    """A job's budget as the store counts it."""

    cap_nusd: int | None = None
    """The cap; None when the job has no budget."""
    spent_nusd: int = 0
    """Cost of every billed call recorded so far."""
    reserved_nusd: int = 0
    """Estimated cost of calls in flight (reserved, not yet released)."""
    exhausted: bool = False
    """True once a reservation was refused: sub-agent nodes that start later are refused."""

    @property
    def left_nusd(self) -> int | None:
        """Cap minus spent and reserved (None without a cap)."""
        if self.cap_nusd is None:
            return None
        return self.cap_nusd - self.spent_nusd - self.reserved_nusd


def admits(state: BudgetState, amount_nusd: int, *, closing: bool) -> bool:
    """Whether a reservation of ``amount_nusd`` fits (the Lua script reserve.lua mirrors this).

    ``closing`` is the aggregation: it ignores ``exhausted`` (it runs on what succeeded when
    the budget left covers it) but never the cap itself.
    """
    if state.cap_nusd is None:
        return True
    if state.exhausted and not closing:
        return False
    return state.spent_nusd + state.reserved_nusd + amount_nusd <= state.cap_nusd


@dataclass(frozen=True)
class HeldAnswer:
    """A billed answer not yet in the ledger, held under its call's claim until its node's
    envelope is stored with it (JobStore.finish_billed_node): one write instead of two."""

    call: BilledCall
    """The billed response, with its answer and key."""
    claim: Lease
    """The call's claim: the answer is stored only while it holds, and released with it."""
    also: Companion | None = None
    """Another module's command sent with the answer's write (the answered attempt's
    admission finish, swarm.store.companion); run alone when the answer is written alone."""
