"""Admission of a local backend's calls: permits held by abandoned requests, late answers.

A local server computes a request the node stopped waiting for (swarm.calls.local.overtime),
so that request keeps its admission permits until it ends (a one-slot server is sent
nothing to queue behind it) or shows it hangs (swarm.calls.local.abandoned). Its answer,
when it comes while the call still retries, is the call's answer (swarm.calls.local.late):
the next attempt takes it instead of asking again, before or while it waits for a permit,
and a call whose request is still read waits for a permit in its task (polling at most
``LATE_POLL_S``) instead of going back to the queue, where that answer would reach no one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial

from swarm.calls.admission.base import Permit
from swarm.calls.admission.gate import Gate, outcome_of_error
from swarm.calls.local.abandoned import AbandonedPermits, Release
from swarm.calls.local.late import LateAnswers
from swarm.calls.local.overtime import StillReading
from swarm.calls.request import Answer

log = logging.getLogger(__name__)

LATE_POLL_S = 1.0
"""Longest sleep of a call waiting for a permit while one of its requests is still read."""


@dataclass(eq=False)
class HoldingGate(Gate):
    """A local backend's gate: the lean gate, plus held permits and late answers."""

    abandoned: AbandonedPermits = field(default_factory=AbandonedPermits, kw_only=True)
    """The process's permits of abandoned requests (the Runtime's; a gate's own when none is
    given)."""
    late: LateAnswers = field(init=False, default_factory=LateAnswers)
    """The call's late answer, for its next attempt."""

    def _stop_waiting(self) -> bool:
        return self.late.ready()

    def _stay_in_task(self) -> float | None:
        return LATE_POLL_S if self.late.coming() else None

    def _freed(self) -> bool:
        return self.abandoned.starved(self.spec.backend)

    def call(self, attempt: Callable[[], Answer]) -> Answer:
        """One admitted attempt, or the call's late answer instead (taken before or during
        the wait for a permit; a permit got meanwhile goes back unsent). A request that
        goes on past its deadline (StillReading) keeps its permit until it ends."""
        if (answer := self.late.take()) is not None:
            return answer
        permit = self._acquire()
        if (answer := self.late.take()) is not None:
            if permit is not None:
                self._settle_through_outage(permit)
            return answer
        assert permit is not None  # None only when a late answer is kept
        backend, sent_at = self.spec.backend, self.abandoned.clock()
        try:
            answer = attempt()
        except StillReading as exc:  # the gateway is still computing it
            self.late.expect()
            held = self.abandoned.hold(backend, partial(self._settle_abandoned, permit, exc))
            exc.when_ended(held.end)
            raise
        except BaseException as exc:
            self.abandoned.ended(backend)
            self._settle_through_outage(permit, error=exc)
            raise
        self._settle_through_outage(permit, answer=answer)
        self.abandoned.answered(backend, sent_at)
        return answer

    def _settle_abandoned(
        self, permit: Permit, error: BaseException, ended: Answer | BaseException | Release
    ) -> None:
        """Finish the permit of a request that timed out but went on, once it has ended: it
        ends as the timeout it was to the node, charged the tokens of a late answer. A
        ``Release``: the permit goes back before the request ends, charged nothing; when a
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
