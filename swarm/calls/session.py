"""One owner per call: the session that claims a call's slot, records its attempts and
commits its answer, so no call is billed twice and none goes past the budget.

Each call of a job (a sub-agent node, the aggregation) has an idempotency key: job, slot
(node id), model and a hash of the exact request (messages and max_tokens). A CallSession:

1. claims the slot, so one run calls at a time; a duplicate run (a redelivered or repeated
   task message) waits for the holder, and reuses its answer once stored. The claim's
   round trip carries the first attempt's permit ask as its companion
   (swarm.store.companion), when the call asks one there;
2. reuses the answer stored under the key when an earlier run got one (a crash after the
   gateway answered, a retried task): the gateway is not called again;
3. reserves the call's cost bound against the job's budget (swarm.cost.budget); a refusal means
   the call is not made;
4. records each billed response the moment it arrives (``recorded``), before anything else
   can fail: the ledger line, the spent budget and the answer are written by one atomic
   store call, counted once by the response's call id. A plain node's own answer under a
   claim lease (CallRequest.hold_answer, no budget) is held instead (``held``, a
   ``HeldCall``) with the answered attempt's permit finish as its companion: its
   ``commit(envelope)`` writes the answer, the ledger line, the envelope and the finish
   in one round trip; an error on the way out of the session commits it alone;
5. on exit, gives back a first permit no attempt used, releases the reservation and the
   claim (a claim held as a lease ends with the stored answer, in the same round trip).

In a worker the claim is a lease (swarm.store.leases), renewed by the process's heartbeat
while the call runs, and its fencing token keeps a holder that lost it from storing its
answer (what the gateway billed it is still counted). The claim is taken, and checked
before a request after a gap (``still_held``), for ``lease_s`` plus the node timeout (the
request's own timeout), and a renewal never shortens it: a request sent under the claim
ends before the claim can lapse, even if its process freezes, starves or is cut off from
Redis right after sending it. Never two calls for one slot at once: a run that takes over
from a killed or frozen holder waits at most ``lease_s`` plus the node timeout. Without a
heartbeat (the embedded mode) the claim lasts ``visibility_timeout_s``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

from swarm.calls.admission.base import PendingAcquire
from swarm.calls.request import Answer, CallRequest, HeldCall
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
class CallSession:
    """Use as ``with CallSession(...) as session:``; then ``session.reused`` /
    ``session.refused`` say whether to skip the call, and ``session.recorded(call)`` is the
    call to make."""

    rt: Runtime
    request: CallRequest
    first: PendingAcquire | None = None
    """The first attempt's permit ask, sent as the claim's companion."""
    give_back: Callable[[PendingAcquire], None] = lambda first: None
    """Gives ``first``'s permit back unused (Gate.give_back)."""
    owner: str = field(default_factory=unique_hex)
    """Who holds the claim (one id per run)."""
    reused: StoredAnswer | None = field(default=None, init=False)
    """The answer an earlier run stored; set on enter."""
    refused: bool = field(default=False, init=False)
    """True when the budget refused the reservation; set on enter."""
    held: HeldCall | None = field(default=None, init=False)
    """The billed answer held for the caller to commit (CallRequest.hold_answer)."""
    _lease: Lease | None = field(default=None, init=False)
    _reserved: bool = field(default=False, init=False)
    _attempts: int = field(default=0, init=False)
    _answered: bool = field(default=False, init=False)
    """An answer was recorded under the claim's lease (which released the claim)."""
    _started: float = field(default_factory=time.perf_counter, init=False)
    _held_at: float = field(default=0.0, init=False)
    """When the claim's lease was last known held (time.monotonic)."""
    _companion: Companion | None = field(default=None, init=False)
    """The answered attempt's permit finish, to write with the held answer."""

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

    def __enter__(self) -> CallSession:
        self.reused = self._claim()
        if self.reused is None and self.request.budgeted:
            self._reserved = self.rt.store.reserve(
                self.job_id, self._reservation_id, self.bound_nusd, closing=self.request.closing
            )
            self.refused = not self._reserved
        return self

    def __exit__(self, *exc_info: object) -> None:
        if exc_info[0] is not None and self.held is not None:  # never lose a billed answer
            self.held.commit()
            self.held = None
        self._run_companion()
        if (first := self.first_permit()) is not None:  # no attempt used it
            self.give_back(first)
        if self._lease is not None and self.rt.leases is not None:
            self.rt.leases.drop(self._lease)
        if self._reserved:
            self.rt.store.release(self.job_id, self._reservation_id)
        if not self._answered:  # storing the answer under the claim released it already
            self.rt.store.unclaim(self.job_id, self.request.slot, self.owner)

    @property
    def _reservation_id(self) -> str:
        return f"{self.request.slot}:{self.owner}"

    @property
    def claim_ttl_s(self) -> float:
        """How long the claim lives from a write that took or checked it: in a worker, a
        lease plus the node timeout, so that a request sent under it ends (answered, or
        closed by its timeout) before the claim can lapse without the heartbeat."""
        keeper = self.rt.leases
        if keeper is None:
            return float(self.rt.settings.visibility_timeout_s)
        return keeper.lease_s + self.rt.settings.node_timeout_s

    def _claim(self) -> StoredAnswer | None:
        """Take the claim (or wait for its holder's answer); the answer stored, if any."""
        keeper = self.rt.leases
        ttl_s = self.claim_ttl_s
        companion = self.first
        while True:
            asked_at = time.monotonic()  # the claim lives ttl_s from no earlier than this
            claimed, stored = self.rt.store.claim_or_answer(
                self.job_id, self.request.slot, self.owner, ttl_s, self.key, companion=companion
            )
            if companion is not None and not (claimed or stored is not None):
                self.give_back(companion)  # no permit held while waiting for another run
                self.first = None
            companion = None
            if claimed and keeper is not None:
                self._lease = claim_lease(self.job_id, self.request.slot, self.owner)
                self._held_at = asked_at
                keeper.hold(self._lease)
            if claimed or stored is not None:
                return stored
            time.sleep(CLAIM_POLL_S)

    def first_permit(self) -> PendingAcquire | None:
        """The permit ask sent with the claim, once: the first attempt starts from it."""
        first, self.first = self.first, None
        return first

    def recorded(self, call: Callable[[], Answer]) -> Callable[[], Answer]:
        """``call``, recording each billed response as soon as it arrives."""

        def attempt() -> Answer:
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
        """Before a request: LeaseLostError when the claim may have lapsed and was taken
        since. Within a heartbeat of the write that last took or checked the claim, it
        holds for ``claim_ttl_s`` from then, longer than any request sent now lives; after
        such a gap (a long admission wait, a retry, a process frozen between claiming and
        calling) the claim is checked and extended to ``claim_ttl_s`` in one round trip."""
        keeper, lease = self.rt.leases, self._lease
        if keeper is None or lease is None or time.monotonic() - self._held_at < keeper.beat_s:
            return
        asked_at = time.monotonic()
        if keeper.lost(lease) or self.rt.store.renew_leases([lease], self.claim_ttl_s):
            raise LeaseLostError(f"claim on {self.request.slot} lost; another run has it")
        self._held_at = asked_at

    def ride_with_answer(self, companion: Companion) -> bool:
        """Take ``companion`` (an answered attempt's permit finish) to write with that
        answer when the answer is going to be held: with the node's envelope, in one round
        trip. False when it is not: the caller runs it now."""
        if self._lease is None or not self._holds_answer() or self._companion is not None:
            return False
        self._companion = companion
        return True

    def _run_companion(self) -> None:
        companion, self._companion = self._companion, None
        if companion is not None:
            companion.run()

    def bill(self, usage: Usage) -> None:
        """Record a billed response whose answer is not used (a hedge that lost the race
        but was answered before its cancel took effect; a request answered after its node
        had timed out, swarm.calls.local.overtime). Counted whether or not the claim is still
        held: the gateway billed it either way; only storing an answer is fenced."""
        self._record(usage, None)

    def _record(self, usage: Usage, answer: Answer | None) -> None:
        stored = None if answer is None else self._stored(usage, answer)
        billed = BilledCall(
            call_id=unique_hex(),
            model=self.request.model.name,
            usage=usage,
            cost_nusd=cost_nusd(self.request.model, usage),
            answer_key=self.key if stored else None,
            answer=stored,
        )
        if stored is not None and self._lease is not None and self._holds_answer():
            companion, self._companion = self._companion, None  # written with the envelope
            held = HeldAnswer(billed, self._lease, companion=companion)
            self.held = HeldCall(self.rt.store, self.job_id, held)
            self._answered = True
            return
        self._run_companion()
        self.rt.store.record_call(self.job_id, billed, fence=self._lease)
        self._answered = self._answered or (stored is not None and self._lease is not None)

    def _stored(self, usage: Usage, answer: Answer) -> StoredAnswer:
        return StoredAnswer(
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

    def _holds_answer(self) -> bool:
        """True when an answer is held for the caller (CallRequest.hold_answer), not written
        now: the first one, of an unbudgeted call."""
        return self.request.hold_answer and not self.request.budgeted and self.held is None
