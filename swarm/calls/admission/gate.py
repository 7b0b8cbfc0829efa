"""Admission around one gateway attempt: wait in the task or go back to the queue.

The domain decides, the task adapter only applies: a rate-limit wait up to ``reserve_s``
books the call's slot and sleeps until it (waiters in arrival order, one round trip each);
another wait up to ``max_wait_s`` sleeps here (a wait for a known moment with jitter, so
waiters do not wake together; a wait for permits out from none to twice the hint); a longer
one raises RetryLater when the caller may requeue (the adapter turns it into
``self.retry(countdown=...)`` and the worker slot serves other work meanwhile), and sleeps
otherwise.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, replace

from swarm import tracing
from swarm.calls import thread_share
from swarm.calls.admission.base import (
    RATE_REFUSALS,
    AdmissionController,
    Ask,
    Decision,
    Outcome,
    PendingAcquire,
    Permit,
    Refusal,
)
from swarm.calls.admission.feedback import exhausted_of, pause_of
from swarm.calls.admission.shares import DEFAULT, Tenant
from swarm.calls.request import Answer, Withdrawn
from swarm.calls.retry_policy import classify
from swarm.catalog import ModelSpec
from swarm.errors import LeaseLostError, RetryLater
from swarm.records import ErrorKind
from swarm.store.companion import Companion
from swarm.store.outages import STORE_OUTAGES
from swarm.unique import unique_hex

log = logging.getLogger(__name__)

MIN_SLEEP_S = 0.001
MAX_JITTER_S = 0.2
"""Waiters for a known moment (a rate limit's slot, a pause's end) add up to this much (or
half their wait) at random, so they do not wake together; waits with no known end are
spread over twice their hint (spread_s)."""
COUNT_REFUSALS = frozenset({Refusal.INFLIGHT, Refusal.FAIR_SHARE, Refusal.TENANT_SHARE})
"""Refusals by permits out (a held permit going back can end them)."""
SHARE_COUNTDOWN_S = 1.0
"""Longest countdown of a task sent back to the queue for its tenant's share: the wait is
an estimate (the other tenants may stop asking sooner), so the task asks again soon; its
worker thread meanwhile serves other work (another tenant's tasks may need it to ask at
all)."""


def wait_or_requeue(
    retry_after_s: float,
    reason: str,
    max_wait_s: float,
    max_countdown_s: float,
    may_requeue: bool,
    *,
    attempted: bool = False,
) -> float:
    """Seconds to sleep in the task, or RetryLater when the wait is long and requeue allowed
    (``attempted``: the wait follows an attempt the gateway answered, which counts)."""
    if retry_after_s > max_wait_s and may_requeue:
        countdown_s = min(retry_after_s, max_countdown_s)
        log.debug("admission: %s for %.2f s, back to the queue for %.2f s", reason,
                  retry_after_s, countdown_s)  # fmt: skip
        raise RetryLater(countdown_s, reason, attempted=attempted)
    return retry_after_s


def spread_s(hint_s: float, rand: float) -> float:
    """A wait with no known end (a full model, a share used up): anywhere from 0 to twice
    the hint, the hint on average. The hint (the admission script's slot_poll) sets how
    often the waiters together ask, about twice per permit given back, assuming their asks
    are spread; waiters refused together (a job's nodes arriving at once) that all slept
    the hint would ask together once per hint while the freed permits stay unused."""
    return 2.0 * hint_s * rand


def outcome_of_error(exc: BaseException, now: float, *, at_limit: bool = False) -> Outcome:
    """A failed attempt refunds its tokens; a 429 is feedback (see Outcome.rate_limited),
    and evidence of the tenant's limit when the gateway says a limit is used up or the call
    was admitted at the configured limit (``at_limit``, Permit.at_limit). An attempt fenced
    off before its request (LeaseLostError), or withdrawn before its answer (Withdrawn: a
    hedged attempt's loser), gives the permit back."""
    if isinstance(exc, LeaseLostError | Withdrawn):
        return Outcome(used_tokens=0, sent=False)
    if classify(exc) is ErrorKind.RATE_LIMITED:
        return Outcome(
            used_tokens=0,
            rate_limited=True,
            retry_after_s=pause_of(exc, now),
            exhausted=exhausted_of(exc) or at_limit,
            failed=True,
        )
    return Outcome(used_tokens=0, failed=True, timed_out=classify(exc) is ErrorKind.TIMEOUT)


def outcome_of_answer(answer: Answer | None) -> Outcome:
    """An answered attempt charges its tokens (None: a request given back unsent); an
    answer whose headers say a limit is used up holds every caller until its reset."""
    if answer is None:
        return Outcome(used_tokens=0, sent=False)
    reset_s = answer.limit_reset_s
    usage = answer.usage
    return Outcome(
        used_tokens=usage.total_tokens or None,
        exhausted=reset_s is not None,
        retry_after_s=reset_s or None,
        completion_tokens=usage.completion_tokens if usage.total_tokens else None,
    )


@dataclass(eq=False)
class Gate:
    """Admission for the attempts of one call (one node or one aggregation): acquire a
    permit, send, finish the permit with the attempt's outcome.

    The hooks ``_stop_waiting``, ``_stay_in_task`` and ``_freed`` are what a local backend's
    gate changes (swarm.calls.local.gate); here they never act."""

    controller: AdmissionController
    spec: ModelSpec
    job_id: str
    tokens: int
    _: KW_ONLY
    max_wait_s: float
    max_countdown_s: float
    may_requeue: bool
    reserve_s: float = 0.0
    """Capped at ``max_wait_s``."""
    tenant: Tenant = DEFAULT
    charge: int | None = None
    sleep: Callable[[float], None] = time.sleep
    rand: Callable[[], float] = random.random

    def __post_init__(self) -> None:
        self.reserve_s = min(self.reserve_s, self.max_wait_s)

    def acquire(self, first: PendingAcquire | None = None) -> Permit:
        """Block until admitted, or raise RetryLater (see module docstring); ``first``: an
        ask already sent (``ask_later``), whose decision is the first one."""
        permit = self._acquire(first)
        assert permit is not None  # the lean gate never stops waiting early
        return permit

    def ask_of(self, lease_id: str) -> Ask:
        """This call's acquire under ``lease_id``."""
        return Ask(self.job_id, self.tokens, lease_id, self.reserve_s, self.tenant, self.charge)

    def ask_later(self) -> PendingAcquire:
        """An acquire to send as the companion of a store write (swarm.store.companion: the
        call's claim); ``acquire(first=...)`` starts from its decision."""
        return self.controller.acquire_later(self.spec, self.ask_of(unique_hex()))

    def give_back(self, first: PendingAcquire) -> None:
        """Give back the permit of an ask no attempt used (the answer was reused, the claim
        was another run's, the call ended before its first attempt)."""
        if first.decision is not None and first.decision.permit:
            log.debug("admission: %s's permit asked with the claim given back unused",
                      self.spec.name)  # fmt: skip
            self._settle_through_outage(first.decision.permit)

    def _ask(self, lease_id: str) -> Decision:
        """One acquire of this call's permit."""
        return self.controller.acquire(self.spec, self.ask_of(lease_id))

    def _acquire(self, first: PendingAcquire | None = None) -> Permit | None:
        """A permit; None when ``_stop_waiting`` says the call needs none any more."""
        decided = first.decision if first is not None else None
        lease_id = first.lease_id if first is not None else unique_hex()
        waited_for_rate = False
        while True:
            if self._stop_waiting():
                if decided is not None and decided.permit is not None:
                    self._settle_through_outage(decided.permit)
                return None
            decision = decided or self._ask(lease_id)
            decided = None
            if (permit := decision.permit) is not None:
                if decision.start_in_s <= 0 or self._still_open(permit, decision):
                    # a call that waited for a rate limit's slot comes at that limit's rate
                    return replace(permit, at_limit=True) if waited_for_rate else permit
                continue
            if decision.reason in COUNT_REFUSALS and self._freed():
                continue
            waited_for_rate |= decision.reason in RATE_REFUSALS
            wait_s = self._wait_s(decision)
            tracing.waited(str(decision.reason), wait_s)  # an event on the attempt's span
            self.sleep(wait_s)

    def _wait_s(self, decision: Decision) -> float:
        """How long to sleep before asking again (with jitter), or RetryLater. A tenant
        over its share waits in the task when the waiting tenants should catch up within
        ``max_wait_s``, and goes back to the queue (for at most SHARE_COUNTDOWN_S) when not;
        it never sleeps past ``max_wait_s`` at a time."""
        stay = self._stay_in_task()
        if decision.reason in COUNT_REFUSALS and self.may_requeue and stay is None and (
                thread_share.gives_way()):  # fmt: skip
            raise RetryLater(thread_share.COUNTDOWN_S, "thread_wanted")
        share = decision.reason is Refusal.TENANT_SHARE
        delay = wait_or_requeue(
            decision.retry_after_s,
            str(decision.reason),
            self.max_wait_s,
            min(self.max_countdown_s, SHARE_COUNTDOWN_S) if share else self.max_countdown_s,
            self.may_requeue and stay is None,
        )
        if share:
            log.debug("admission: %s: tenant %s over its share, the others catch up in "
                      "%.2f s: waits in the task", self.spec.name, self.tenant.name,
                      decision.retry_after_s)  # fmt: skip
            delay = min(delay, self.max_wait_s)
        if stay is not None:
            delay = min(delay, stay)
        sleep_s = spread_s(delay, self.rand()) if decision.reason in COUNT_REFUSALS else (
            delay + self.rand() * min(0.5 * delay, MAX_JITTER_S))  # fmt: skip
        log.debug("admission: %s waits %.3f s (%s)", self.spec.name, sleep_s, decision.reason)
        return max(MIN_SLEEP_S, sleep_s)

    def _stop_waiting(self) -> bool:
        """True when the call no longer needs a permit (never, here)."""
        return False

    def _stay_in_task(self) -> float | None:
        """Seconds a call polls at most instead of going back to the queue; None (here):
        a long wait goes back to the queue when the caller may requeue."""
        return None

    def _freed(self) -> bool:
        """True when a permit of this backend went back just now: ask again at once."""
        return False

    def _still_open(self, permit: Permit, decision: Decision) -> bool:
        """Sleep until the booked slot; False (permit given back, tokens refunded) when a
        429 paused the model meanwhile: the next acquire then waits out the pause."""
        self.sleep(decision.start_in_s)
        try:
            if self.controller.pause_left_s(self.spec) <= 0:
                return True
        except STORE_OUTAGES:  # Redis unreachable: the permit goes back or lapses
            self._settle_through_outage(permit)
            raise
        self.controller.finish(self.spec, permit, Outcome(used_tokens=0, sent=False))
        return False

    def try_acquire(self) -> Permit | None:
        """A permit if the model admits a call right now, else None (never waits; a hedge
        asks once and is not sent when the model is at its limits)."""
        ask = Ask(self.job_id, self.tokens, tenant=self.tenant, charge=self.charge)
        return self.controller.acquire(self.spec, ask).permit

    def call(self, attempt: Callable[[], Answer]) -> Answer:
        """One admitted attempt: acquire, call, then finish with its outcome."""
        return self.admitted(attempt)

    def admitted(
        self,
        attempt: Callable[[], Answer],
        first: PendingAcquire | None = None,
        ride: Callable[[Companion], bool] | None = None,
    ) -> Answer:
        """``call``, starting from ``first`` (an ask sent with the claim) when given; an
        answered attempt's finish goes to ``ride`` as a companion (it rides with the store
        write that records the answer, one round trip fewer per call), and runs now when
        ``ride`` does not take it."""
        permit = self.acquire(first)
        try:
            answer = attempt()
        except BaseException as exc:
            self._settle_through_outage(permit, error=exc)
            raise
        outcome = outcome_of_answer(answer)
        if ride is None or not ride(self.controller.finish_later(self.spec, permit, outcome)):
            self._settle_through_outage(permit, answer=answer)
        return answer

    def _settle_through_outage(
        self, permit: Permit, answer: Answer | None = None, error: BaseException | None = None
    ) -> None:
        """``settle`` (neither ``answer`` nor ``error``: give the permit back unused), unless
        Redis cannot be reached (a failover under way): then the attempt's own outcome goes
        on (an answer the gateway billed must reach the ledger, a billed error keeps its
        usage) and the permit's lease lapses on its own."""
        try:
            self.settle(permit, answer=answer, error=error)
        except STORE_OUTAGES as exc:
            log.debug("admission: %s's permit not finished, Redis unreachable (%s); it lapses",
                      self.spec.name, exc)  # fmt: skip

    def settle(
        self,
        permit: Permit,
        answer: Answer | None = None,
        error: BaseException | None = None,
        *,
        requeue: bool = True,
    ) -> None:
        """Finish ``permit``: tokens of ``answer``, or ``error``'s outcome (a 429 pauses the
        model; with ``requeue`` a long pause raises RetryLater now rather than after a
        backoff); neither refunds the reservation (a cancelled request)."""
        if error is None:
            verdict = self.controller.finish(self.spec, permit, outcome_of_answer(answer))
            if verdict.paused:
                log.debug("admission: %s says a limit is used up: every caller waits %.2f s",
                          self.spec.name, answer.limit_reset_s if answer else 0.0)  # fmt: skip
            return
        outcome = outcome_of_error(error, time.time(), at_limit=permit.at_limit)
        self.controller.finish(self.spec, permit, outcome)
        if requeue and outcome.rate_limited and outcome.retry_after_s is not None:
            try:
                wait_or_requeue(outcome.retry_after_s, "paused", self.max_wait_s,
                                self.max_countdown_s, self.may_requeue, attempted=True)  # fmt: skip
            except RetryLater as later:
                raise later from error
