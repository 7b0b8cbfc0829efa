"""Admission around one gateway attempt: wait in the task or go back to the queue.

The domain decides, the task adapter only applies: a rate-limit wait up to ``reserve_s``
books the call's slot and sleeps until it (waiters in arrival order, one round trip each);
another wait up to ``max_wait_s`` sleeps here (with jitter, so waiters do not wake
together); a longer one raises RetryLater when the caller may requeue (the adapter turns
it into ``self.retry(countdown=...)`` and the worker slot serves other work meanwhile),
and sleeps otherwise.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from functools import partial

from swarm.calls.admission.abandoned import AbandonedPermits, Release
from swarm.calls.admission.base import (
    RATE_REFUSALS,
    AdmissionController,
    Decision,
    Outcome,
    Permit,
    Refusal,
)
from swarm.calls.admission.feedback import exhausted_of, pause_of
from swarm.calls.late import LateAnswers
from swarm.calls.overtime import StillReading
from swarm.calls.request import Answer
from swarm.calls.retry_policy import classify
from swarm.catalog import ModelSpec
from swarm.errors import LeaseLostError, RetryLater
from swarm.records import ErrorKind
from swarm.store.outages import STORE_OUTAGES

log = logging.getLogger(__name__)

MIN_SLEEP_S = 0.001
MAX_JITTER_S = 0.2
"""Waiters add up to this much (or half their wait) at random, so they do not wake together."""
LATE_POLL_S = 1.0
"""Longest sleep of a call waiting for a permit while one of its requests is still read."""
COUNT_REFUSALS = frozenset({Refusal.INFLIGHT, Refusal.FAIR_SHARE})
"""Refusals by permits out (a held permit going back can end them)."""


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


def outcome_of_error(exc: BaseException, now: float, *, at_limit: bool = False) -> Outcome:
    """A failed attempt refunds its tokens; a 429 is feedback (see Outcome.rate_limited),
    and evidence of the tenant's limit when the gateway says a limit is used up or the call
    was admitted at the configured limit (``at_limit``, Permit.at_limit). An attempt fenced
    off before its request (LeaseLostError) was never sent: it gives the permit back."""
    if isinstance(exc, LeaseLostError):
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
    return Outcome(
        used_tokens=answer.usage.total_tokens or None,
        exhausted=reset_s is not None,
        retry_after_s=reset_s or None,
    )


class Gate:
    """Admission for the attempts of one call (one node or one aggregation)."""

    def __init__(
        self,
        controller: AdmissionController,
        spec: ModelSpec,
        job_id: str,
        tokens: int,
        *,
        max_wait_s: float,
        max_countdown_s: float,
        may_requeue: bool,
        reserve_s: float = 0.0,
        sleep: Callable[[float], None] = time.sleep,
        rand: Callable[[], float] = random.random,
        abandoned: AbandonedPermits | None = None,
    ) -> None:
        self.controller = controller
        self.spec = spec
        self.job_id = job_id
        self.tokens = tokens
        self.max_wait_s = max_wait_s
        self.max_countdown_s = max_countdown_s
        self.may_requeue = may_requeue
        self.reserve_s = min(reserve_s, max_wait_s)
        self.sleep = sleep
        self.rand = rand
        self.abandoned = abandoned or AbandonedPermits()
        """The process's permits of abandoned requests (the Runtime's; a gate's own when
        none is given)."""
        self.budget_spent = False
        """Set by each finished attempt: the model's retry budget is spent (retry no more)."""

    def acquire(self) -> Permit:
        """Block until admitted, or raise RetryLater (see module docstring)."""
        permit = self._acquire(None)
        assert permit is not None  # without a late answer to wait for, only a permit ends it
        return permit

    def _acquire(self, late: LateAnswers | None) -> Permit | None:
        """A permit; None when ``late`` has an answer (it came while the call waited). While
        a request of the call is still being read (``late.coming``), a long wait stays in
        the task: going back to the queue would leave that answer to no one."""
        lease_id = uuid.uuid4().hex
        waited_for_rate = False
        while True:
            if late is not None and late.ready():
                return None
            decision = self.controller.acquire(
                self.spec, self.job_id, self.tokens, lease_id, self.reserve_s
            )
            if (permit := decision.permit) is not None:
                if decision.start_in_s <= 0 or self._still_open(permit, decision):
                    # a call that waited for a rate limit's slot comes at that limit's rate
                    return replace(permit, at_limit=True) if waited_for_rate else permit
                continue
            if decision.reason in COUNT_REFUSALS and self.abandoned.starved(self.spec.backend):
                continue  # a permit held for a request that ends nothing went back
            waited_for_rate |= decision.reason in RATE_REFUSALS
            coming = late is not None and late.coming()
            delay = wait_or_requeue(
                decision.retry_after_s,
                str(decision.reason),
                self.max_wait_s,
                self.max_countdown_s,
                self.may_requeue and not coming,
            )
            if coming:
                delay = min(delay, LATE_POLL_S)
            jitter_s = self.rand() * min(0.5 * delay, MAX_JITTER_S)
            log.debug("admission: %s waits %.3f s (%s)", self.spec.name, delay + jitter_s,
                      decision.reason)  # fmt: skip
            self.sleep(max(MIN_SLEEP_S, delay + jitter_s))

    def _still_open(self, permit: Permit, decision: Decision) -> bool:
        """Sleep until the booked slot; False (permit given back, tokens refunded) when a
        429 paused the model meanwhile: the next acquire then waits out the pause."""
        self.sleep(decision.start_in_s)
        try:
            if self.controller.pause_left_s(self.spec) <= 0:
                return True
        except STORE_OUTAGES:  # Redis unreachable: the permit goes back or lapses
            self._settle_through_outage(permit, error=None, unsent=True)
            raise
        self.controller.finish(self.spec, permit, Outcome(used_tokens=0, sent=False))
        return False

    def wrap(self, attempt: Callable[[], Answer]) -> Callable[[], Answer]:
        """``attempt`` with admission around each of its calls."""
        return lambda: self.call(attempt)

    def try_acquire(self) -> Permit | None:
        """A permit if the model admits a call right now, else None (never waits; a hedge
        asks once and is not sent when the model is at its limits)."""
        return self.controller.acquire(self.spec, self.job_id, self.tokens).permit

    def call(self, attempt: Callable[[], Answer], late: LateAnswers | None = None) -> Answer:
        """One admitted attempt: acquire, call, then finish with its outcome. ``late``: the
        call's late answers (swarm.calls.late); one there is taken instead of a request,
        before or during the wait for a permit (given back unsent when it came meanwhile)."""
        if late is not None and (answer := late.take()) is not None:
            return answer
        permit = self._acquire(late)
        if late is not None and (answer := late.take()) is not None:
            if permit is not None:
                self.controller.finish(self.spec, permit, Outcome(used_tokens=0, sent=False))
            return answer
        assert permit is not None  # None only when a late answer is kept
        backend, sent_at = self.spec.backend, self.abandoned.clock()
        try:
            answer = attempt()
        except BaseException as exc:
            if isinstance(exc, StillReading):  # the gateway is still computing it
                if late is not None:
                    late.expect()
                held = self.abandoned.hold(backend, partial(self._settle_abandoned, permit, exc))
                exc.when_ended(held.end)
            else:
                self.abandoned.ended(backend)
                self._settle_through_outage(permit, error=exc)
            raise
        self._settle_through_outage(permit, answer=answer)
        self.abandoned.answered(backend, sent_at)
        return answer

    def _settle_through_outage(
        self,
        permit: Permit,
        answer: Answer | None = None,
        error: BaseException | None = None,
        *,
        unsent: bool = False,
    ) -> None:
        """``settle`` (``unsent``: give the permit back unused), unless Redis cannot be
        reached (a failover under way): then the attempt's own outcome goes on (an answer
        the gateway billed must reach the ledger, a billed error keeps its usage) and the
        permit's lease lapses on its own."""
        try:
            if unsent:
                self.controller.finish(self.spec, permit, Outcome(used_tokens=0, sent=False))
            else:
                self.settle(permit, answer=answer, error=error)
        except STORE_OUTAGES as exc:
            log.debug("admission: %s's permit not finished, Redis unreachable (%s); it lapses",
                      self.spec.name, exc)  # fmt: skip

    def _settle_abandoned(
        self, permit: Permit, error: BaseException, ended: Answer | BaseException | Release
    ) -> None:
        """Finish the permit of a request that timed out but went on (swarm.calls.overtime)
        once it has ended: until then the gateway is still computing it, so it counts in
        flight and a one-slot server is sent nothing more. It ends as the timeout it was to
        the node, charged the tokens of a late answer. A ``Release``: the permit goes back
        before the request ends (swarm.calls.admission.abandoned), charged nothing; when a
        newer request was answered meanwhile (overtaken), the timeout is no sign of a
        backend at its limit and does not bring the adaptive limit down."""
        outcome = outcome_of_error(error, time.time(), at_limit=permit.at_limit)
        if isinstance(ended, Release):
            if ended is Release.OVERTAKEN:
                outcome = replace(outcome, timed_out=False)
            self.controller.finish(self.spec, permit, outcome)
            return
        tokens = ended.usage.total_tokens if isinstance(ended, Answer) else 0
        log.debug("admission: %s's abandoned request ended (%s): its permit is back",
                  self.spec.name, type(ended).__name__)  # fmt: skip
        self.controller.finish(self.spec, permit, replace(outcome, used_tokens=tokens))

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
            self.budget_spent = verdict.budget_spent
            if verdict.paused:
                log.debug("admission: %s says a limit is used up: every caller waits %.2f s",
                          self.spec.name, answer.limit_reset_s if answer else 0.0)  # fmt: skip
            return
        outcome = outcome_of_error(error, time.time(), at_limit=permit.at_limit)
        verdict = self.controller.finish(self.spec, permit, outcome)
        self.budget_spent = verdict.budget_spent
        if verdict.budget_spent:
            log.debug("admission: %s fails nearly every request: no retry", self.spec.name)
            return
        if requeue and outcome.rate_limited and outcome.retry_after_s is not None:
            try:
                wait_or_requeue(outcome.retry_after_s, "paused", self.max_wait_s,
                                self.max_countdown_s, self.may_requeue, attempted=True)  # fmt: skip
            except RetryLater as later:
                raise later from error
