"""Typed arguments of the job store's Lua scripts (swarm/store/lua), one record per script;
fields follow each script's header (see swarm.store.scripts)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from swarm.store.billing import BilledCall
from swarm.store.scripts import ScriptArgs, ScriptPart


@dataclass(frozen=True)
class _StoreScript(ScriptArgs):
    PACKAGE: ClassVar[str] = "swarm.store"


@dataclass(frozen=True)
class NodeKeys(ScriptPart):
    """The keys lib/envelope.lua's ``store_envelope`` writes or checks."""

    envelopes: str
    states: str
    fence: str


@dataclass(frozen=True)
class LedgerKeys(ScriptPart):
    """The keys a billed call's write touches (lib/ledger.lua, and the stored answer)."""

    billed: str
    ledger: str
    budget: str
    answers: str


@dataclass(frozen=True)
class NodeWrite(ScriptPart):
    """A node's envelope to store (lib/envelope.lua's ``store_envelope``)."""

    node_id: str
    envelope: str
    state: str
    ttl_s: int
    fence_token: str


@dataclass(frozen=True)
class CallLine(ScriptPart):
    """A billed call's ledger line (lib/ledger.lua's ``count_call``)."""

    call_id: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    reasoning_tokens: int
    cost_nusd: int

    @classmethod
    def of(cls, call: BilledCall) -> CallLine:
        """``call``'s line (its usage's fields are the token fields, by name)."""
        return cls(call.call_id, call.model, **call.usage.model_dump(), cost_nusd=call.cost_nusd)


@dataclass(frozen=True)
class FinishNodeArgs(_StoreScript):
    """Store a node's envelope unless an ok one is there."""

    SCRIPT: ClassVar[str] = "finish"
    KEYS: ClassVar[int] = 1
    PRELUDES: ClassVar[tuple[str, ...]] = ("envelope",)
    node_keys: NodeKeys
    node: NodeWrite


@dataclass(frozen=True)
class FinishBilledArgs(_StoreScript):
    """Record a node's billed answer and store its envelope, in one script."""

    SCRIPT: ClassVar[str] = "finish_billed"
    KEYS: ClassVar[int] = 3
    PRELUDES: ClassVar[tuple[str, ...]] = ("ledger", "envelope")
    node_keys: NodeKeys
    ledger_keys: LedgerKeys
    claim: str
    node: NodeWrite
    call: CallLine
    answer_key: str
    answer: str
    claim_token: str


@dataclass(frozen=True)
class RecordArgs(_StoreScript):
    """Count one billed response once and store its answer."""

    SCRIPT: ClassVar[str] = "record"
    KEYS: ClassVar[int] = 2
    PRELUDES: ClassVar[tuple[str, ...]] = ("ledger",)
    ledger_keys: LedgerKeys
    fence: str
    call: CallLine
    answer_key: str
    answer: str
    ttl_s: int
    fence_token: str


@dataclass(frozen=True)
class ReserveArgs(_StoreScript):
    """Reserve a call's cost bound against the budget."""

    SCRIPT: ClassVar[str] = "reserve"
    KEYS: ClassVar[int] = 1
    budget: str
    reservation_id: str
    amount_nusd: int
    closing: str
    ttl_s: int


@dataclass(frozen=True)
class ReleaseArgs(_StoreScript):
    """Release a reservation."""

    SCRIPT: ClassVar[str] = "release"
    KEYS: ClassVar[int] = 1
    budget: str
    reservation_id: str


@dataclass(frozen=True)
class UnclaimArgs(_StoreScript):
    """Delete a claim if it is still ours."""

    SCRIPT: ClassVar[str] = "unclaim"
    KEYS: ClassVar[int] = 1
    claim: str
    owner: str


@dataclass(frozen=True)
class ReopenArgs(_StoreScript):
    """Reopen a finished job for resume."""

    SCRIPT: ClassVar[str] = "reopen"
    KEYS: ClassVar[int] = 6
    report: str
    cancel: str
    budget: str
    resumes: str
    spec: str
    revision: str
    cap_nusd: int | str
    spec_json: str
    spec_rev: str
    ttl_s: int


@dataclass(frozen=True)
class RenewArgs(_StoreScript):
    """Renew the leases of one job that still hold their tokens."""

    SCRIPT: ClassVar[str] = "renew"
    KEYS: ClassVar[int] = 1
    leases: tuple[str, ...]
    ttl_ms: int
    tokens: tuple[str, ...]


@dataclass(frozen=True)
class IndexArgs(_StoreScript):
    """List (or move) task leases in the lapse index."""

    SCRIPT: ClassVar[str] = "index"
    KEYS: ClassVar[int] = 1
    index: str
    ttl_ms: int
    mode: str
    members: tuple[str, ...]


@dataclass(frozen=True)
class DueArgs(_StoreScript):
    """Task leases that lapsed."""

    SCRIPT: ClassVar[str] = "due"
    KEYS: ClassVar[int] = 1
    index: str
    limit: int


@dataclass(frozen=True)
class LapseArgs(_StoreScript):
    """Hold a lapsed task lease for a sweeper, or settle it once its message is sent."""

    SCRIPT: ClassVar[str] = "lapse"
    KEYS: ClassVar[int] = 3
    index: str
    lease: str
    resend: str
    mode: str
    member: str
    token: str
    hold_ms: int
    task_id: str


@dataclass(frozen=True)
class ReceiveArgs(_StoreScript):
    """Lease a received task message unless a live run holds the lease."""

    SCRIPT: ClassVar[str] = "receive"
    KEYS: ClassVar[int] = 1
    lease: str
    token: str
    ttl_ms: int
    hold: str


@dataclass(frozen=True)
class CountStatesArgs(_StoreScript):
    """Count a job's node states on the server (a progress read without the whole hash)."""

    SCRIPT: ClassVar[str] = "count_states"
    KEYS: ClassVar[int] = 1
    states: str


STORE_SCRIPTS: tuple[type[ScriptArgs], ...] = tuple(_StoreScript.__subclasses__())
"""The record of every script in swarm/store/lua (each class above)."""
