"""No call billed twice, and no call past the budget: the guard around every gateway call.

Each call of a job (a sub-agent node, the aggregation) has an idempotency key: job, slot
(node id), model and a hash of the exact request (messages and max_tokens). A CallGuard:

1. claims the slot, so one run calls at a time; a duplicate run (a redelivered or repeated
   task message) waits for the holder, and reuses its answer once stored (the first claim
   can carry another module's command in its round trip: the first attempt's acquire,
   swarm.store.companion);
2. reuses the answer stored under the key when an earlier run got one (a crash after the
   gateway answered, a retried task): the gateway is not called again;
3. reserves the call's cost bound against the job's budget (swarm.cost.budget); a refusal means
   the call is not made;
4. wraps the call so each billed response is recorded the moment it arrives, before
   anything else can fail: the ledger line, the spent budget and the answer are written by
   one atomic store call, counted once by the response's call id. A plain node's own
   answer under a claim lease (CallRequest.hold_answer, no budget) is held instead
   (``held``) and written with the node's envelope in one script; an error on the way out
   of the guard writes it at once;
5. on exit, releases the reservation and the claim (a claim held as a lease ends with the
   stored answer, in the same round trip).

In a worker the claim is a lease (swarm.store.leases) of ``lease_s``, renewed by the
process's heartbeat while the call runs: a run that was killed or frozen holding it blocks
the run that takes over for at most ``lease_s``, and its fencing token keeps a holder that
lost it from storing its answer (what the gateway billed it is still counted). Without a
heartbeat (the embedded mode) the claim lasts ``visibility_timeout_s``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

from swarm.calls.request import Answer, CallRequest
from swarm.calls.retry_policy import BadResponseError
from swarm.calls.runtime import Runtime
from swarm.cost.budget import call_bound_nusd
from swarm.cost.pricing import cost_nusd
from swarm.errors import LeaseLostError
from swarm.records import Usage
from swarm.store.billing import BilledCall, HeldAnswer, StoredAnswer
from swarm.store.companion import Companion
from swarm.store.leases import Lease, claim_lease
from swarm.unique import unique_hex

CLAIM_POLL_S = 0.1
"""How often a duplicate run looks for the holder's answer."""


@dataclass
class CallGuard:
    """Use as ``with CallGuard(...) as guard:``; then ``guard.reused`` / ``guard.refused``
    say whether to skip the call, and ``guard.recorded(call)`` is the call to make."""

    rt: Runtime
    request: CallRequest
    owner: str = field(default_factory=unique_hex)
    """Who holds the claim (one id per run)."""
    first: Companion | None = None
    """Another module's command sent with the first claim (the first permit's acquire)."""
    drop_first: Callable[[], None] = lambda: None
    """Undoes ``first`` when that claim found the slot held by another run (it waits)."""
    reused: StoredAnswer | None = field(default=None, init=False)
    """The answer an earlier run stored; set on enter."""
    refused: bool = field(default=False, init=False)
    """True when the budget refused the reservation; set on enter."""
    _lease: Lease | None = field(default=None, init=False)
    _reserved: bool = field(default=False, init=False)
    _attempts: int = field(default=0, init=False)
    _answered: bool = field(default=False, init=False)
    """An answer was recorded under the claim's lease (which released the claim)."""
    _started: float = field(default_factory=time.perf_counter, init=False)
    _held_at: float = field(default=0.0, init=False)
    """When the claim's lease was last known held (time.monotonic)."""
    held: HeldAnswer | None = field(default=None, init=False)
    """The billed answer held for the caller to record (CallRequest.hold_answer)."""
    _carried: Companion | None = field(default=None, init=False)
    """A command to send with the next answer held (``carry``)."""

    @property
    def key(self) -> str:
        """This call's idempotency key."""
        return self.request.key

    @property
    def job_id(self) -> str:
        """The job the call belongs to."""
        return self.request.job_id

    @cached_property
    def bound_nusd(self) -> int:
        """What the call reserves: its cost bound (swarm.cost.budget)."""
        request = self.request
        return call_bound_nusd(request.model, request.prompt_tokens, request.max_tokens)

    def __enter__(self) -> CallGuard:
        store = self.rt.store
        self.reused = self._claim()
        if self.reused is None and self.request.budgeted:
            res_id = self._reservation_id
            self._reserved = store.reserve(
                self.job_id, res_id, self.bound_nusd, closing=self.request.closing
            )
            self.refused = not self._reserved
        return self

    def __exit__(self, *exc_info: object) -> None:
        if exc_info[0] is not None and self.held is not None:  # never lose a billed answer
            self.rt.store.record_held(self.job_id, self.held)
            self.held = None
        self._run_carried()
        if self._lease is not None and self.rt.leases is not None:
            self.rt.leases.drop(self._lease)
        if self._reserved:
            self.rt.store.release(self.job_id, self._reservation_id)
        if not self._answered:  # storing the answer under the claim released it already
            self.rt.store.unclaim(self.job_id, self.request.slot, self.owner)

    @property
    def _reservation_id(self) -> str:
        return f"{self.request.slot}:{self.owner}"

    def _claim(self) -> StoredAnswer | None:
        """Take the claim (or wait for its holder's answer); the answer stored, if any."""
        keeper = self.rt.leases
        ttl_s = keeper.lease_s if keeper else self.rt.settings.visibility_timeout_s
        also, self.first = self.first, None
        while True:
            claimed, stored = self.rt.store.claim_or_answer(
                self.job_id, self.request.slot, self.owner, ttl_s, self.key, also=also
            )
            if also is not None and not (claimed or stored is not None):
                self.drop_first()  # no permit held while waiting for another run
            also = None
            if claimed and keeper is not None:
                self._lease = claim_lease(self.job_id, self.request.slot, self.owner)
                self._held_at = time.monotonic()
                keeper.hold(self._lease)
            if claimed or stored is not None:
                return stored
            time.sleep(CLAIM_POLL_S)

    def recorded(self, call: Callable[[], Answer]) -> Callable[[], Answer]:
        """``call``, recording each billed response as soon as it arrives."""

        def attempt() -> Answer:
            self.still_held()
            self._attempts += 1
            try:
                answer = call()
            except BadResponseError as exc:
                if exc.usage is not None and exc.usage != Usage():
                    self._record(exc.usage, None)
                raise
            self._record(answer.usage, answer)
            return answer

        return attempt

    def still_held(self) -> None:
        """Before a call: LeaseLostError when the claim may have lapsed and was taken since.
        Checked in Redis only when the claim was last known held more than a heartbeat ago
        (a process frozen or cut off between claiming and calling): never two calls for
        one slot at once, one round trip only after such a gap or a long backoff."""
        keeper, lease = self.rt.leases, self._lease
        if keeper is None or lease is None or time.monotonic() - self._held_at < keeper.beat_s:
            return
        if keeper.lost(lease) or self.rt.store.renew_leases([lease], keeper.lease_s):
            raise LeaseLostError(f"claim on {self.request.slot} lost; another run has it")
        self._held_at = time.monotonic()

    def carry(self, command: Companion) -> bool:
        """Take ``command`` (an answered attempt's admission finish) to send with the
        answer's write when that answer is going to be held (``held``): with the node's
        envelope, in one round trip. False when it is not: the caller runs it now."""
        if self._lease is None or not self._holds_answer() or self._carried is not None:
            return False
        self._carried = command
        return True

    def _run_carried(self) -> None:
        carried, self._carried = self._carried, None
        if carried is not None:
            carried.run()

    def bill(self, usage: Usage) -> None:
        """Record a billed response whose answer is not used (a hedge that lost the race
        but was answered before its cancel took effect; a request answered after its node
        had timed out, swarm.calls.local.overtime). Counted whether or not the claim is still
        held: the gateway billed it either way; only storing an answer is fenced."""
        self._record(usage, None)

    def _record(self, usage: Usage, answer: Answer | None) -> None:
        stored = None
        if answer is not None:
            stored = StoredAnswer(
                content=answer.content,
                usage=usage,
                finish_reason=answer.finish_reason,
                usage_missing=answer.usage_missing,
                attempts=self._attempts,
                latency_ms=int((time.perf_counter() - self._started) * 1000),
                tool_calls=answer.tool_calls,
                max_tokens_sent=answer.max_tokens_sent,
                reasoning=answer.reasoning,
            )
        billed = BilledCall(
            call_id=unique_hex(),
            model=self.request.model.name,
            usage=usage,
            cost_nusd=cost_nusd(self.request.model, usage),
            answer_key=self.key if stored else None,
            answer=stored,
        )
        if stored is not None and self._lease is not None and self._holds_answer():
            carried, self._carried = self._carried, None  # recorded with the envelope
            self.held = HeldAnswer(billed, self._lease, also=carried)
            self._answered = True
            return
        self._run_carried()
        self.rt.store.record_call(self.job_id, billed, fence=self._lease)
        self._answered = self._answered or (stored is not None and self._lease is not None)

    def _holds_answer(self) -> bool:
        """True when an answer is held for the caller (CallRequest.hold_answer), not written
        now: the first one, of an unbudgeted call."""
        return self.request.hold_answer and not self.request.budgeted and self.held is None
