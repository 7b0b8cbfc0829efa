"""Failures of a whole backend handled as the backend's state, shared by every worker.

- An empty balance or quota (swarm.calls.provider_errors) or a refused key (401) holds the
  backend: its calls fail at once without a request (the refusal quoted, error kind
  ``insufficient_balance`` or ``auth``), until `swarm resume` clears the hold (the account
  is paid, the key fixed) or SWARM_BACKEND_HOLD_S ends.
- A used-up daily limit (Moonshot's TPD) pauses the backend until the reset the provider
  names, else the next 00:00 UTC; a call that would wait longer than
  SWARM_DAILY_LIMIT_WAIT_S fails at once (``daily_limit``).
- Connection refusals and timeouts of SWARM_OUTAGE_MIN_CALLS calls within 10 s show the
  gateway down (a timeout only when the process got no answer from the backend in those
  10 s: beside answers it is a slow request): the backend pauses, one caller a second
  probes it with its own request, and the first answer ends the outage. The attempts
  that met the outage are not spent. Once SWARM_OUTAGE_WINDOW_S has gone by, its calls
  fail (``outage``).

``verdict`` decides as a pure function; swarm.calls.steps.guarding is the call path's step
(outermost, so a paused call holds no admission permit).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from swarm.calls.admission.gate import Gate, wait_or_requeue
from swarm.calls.provider_errors import daily_reset_at, final_for_backend
from swarm.calls.request import CallRequest
from swarm.calls.retries import one_line
from swarm.calls.retry_policy import classify, headers_of, refusal_of
from swarm.errors import BackendHeldError
from swarm.records import ErrorKind
from swarm.settings_slice import SettingsSlice, setting
from swarm.store.backend_holds import BackendHolds, Hold, MemoryBackendHolds
from swarm.store.outages import STORE_OUTAGES

log = logging.getLogger(__name__)

EVIDENCE_S = 10.0
"""Connection failures of different calls this close together show the gateway down."""
PROBE_EVERY_S = 1.0
"""While a backend is down, one request a second (across workers) asks whether it is back."""
NO_HOLD_CACHE_S = 0.5
"""A process asks Redis whether a backend is held at most this often while it is not."""
UNREACHABLE = frozenset({ErrorKind.CONNECTION, ErrorKind.TIMEOUT})


@dataclass(frozen=True)
class HealthPolicy(SettingsSlice):
    """The settings of backend holds (swarm.settings)."""

    outage_window_s: float = setting("outage_window_s")
    outage_min_calls: int = setting("outage_min_calls")
    daily_limit_wait_s: float = setting("daily_limit_wait_s")
    hold_s: float = setting("backend_hold_s")
    probe_every_s: float = PROBE_EVERY_S


class Action(StrEnum):
    """What a call does about its backend's hold."""

    FAIL = "fail"
    WAIT = "wait"
    PROBE = "probe"


def verdict(
    hold: Hold, now: float, policy: HealthPolicy, deadline_at: float | None = None
) -> tuple[Action, float]:
    """What a call does about ``hold`` at ``now``, and for how long it waits (WAIT, PROBE:
    the wait when another caller probes). A daily limit that resets after the job's
    ``deadline_at`` fails the call at once."""
    if hold.kind is ErrorKind.OUTAGE:
        if hold.until is not None and now >= hold.until:
            return Action.FAIL, 0.0
        return Action.PROBE, policy.probe_every_s
    if hold.kind is ErrorKind.DAILY_LIMIT and hold.until is not None:
        left = hold.until - now
        too_late = deadline_at is not None and hold.until > deadline_at
        if left > policy.daily_limit_wait_s or too_late:
            return Action.FAIL, 0.0
        return Action.WAIT, max(left, 0.0)
    return Action.FAIL, 0.0


def _utc(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(at))


def held_message(backend: str, hold: Hold, policy: HealthPolicy) -> str:
    """The error of a call not sent for ``hold``: the provider's words and what to do."""
    if hold.kind is ErrorKind.INSUFFICIENT_BALANCE:
        return (f"the provider refused for the account's balance or quota (backend "
                f"{backend!r}): {hold.message}; no request is sent to it until `swarm resume` "
                f"after paying")  # fmt: skip
    if hold.kind is ErrorKind.AUTH:
        return (f"the provider refused the API key (backend {backend!r}): {hold.message}; no "
                f"request is sent to it until `swarm resume` with a working key")  # fmt: skip
    if hold.kind is ErrorKind.DAILY_LIMIT:
        reset = _utc(hold.until) if hold.until is not None else "its reset"
        return (f"the daily limit of backend {backend!r} is used up until {reset} (later "
                f"than SWARM_DAILY_LIMIT_WAIT_S={policy.daily_limit_wait_s:g} s allows, or "
                f"than the job's deadline): {hold.message}; `swarm resume` after the "
                f"reset")  # fmt: skip
    return (f"outage: the gateway of backend {backend!r} was unreachable for "
            f"{policy.outage_window_s:g} s (SWARM_OUTAGE_WINDOW_S) since {_utc(hold.since)}: "
            f"{hold.message}")  # fmt: skip


@dataclass
class BackendHealth:
    """The holds of a process's backends (shared through Redis in a worker) and its
    policy; remembers for NO_HOLD_CACHE_S that a backend was not held."""

    holds: BackendHolds = field(default_factory=MemoryBackendHolds)
    policy: HealthPolicy = field(default_factory=HealthPolicy)
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    _clear_until: dict[str, float] = field(default_factory=dict)
    _answered_at: dict[str, float] = field(default_factory=dict)
    """When this process last got an answer from each backend."""

    def current(self, backend: str) -> Hold | None:
        """The backend's hold in force, or None."""
        now = self.clock()
        if self._clear_until.get(backend, 0.0) > now:
            return None
        try:
            hold = self.holds.get(backend)
        except STORE_OUTAGES as exc:  # advisory state: the call goes on to admission
            log.debug("backend %s: its holds unreadable (%s), taken as none", backend, exc)
            return None
        if hold is None:
            self._clear_until[backend] = now + NO_HOLD_CACHE_S
        return hold

    def failed(self, backend: str, call: str, exc: BaseException) -> bool:
        """Take a failed attempt's error as news of its backend: hold it, pause it, or count
        a connection failure. True when the attempt met its backend's pause (a daily
        limit, an outage): it is not spent, the call waits. Redis unreachable: nothing
        recorded, the attempt's error stands."""
        try:
            return self._failed(backend, call, exc)
        except STORE_OUTAGES as exc2:
            log.debug("backend %s: hold not recorded, Redis unreachable (%s)", backend, exc2)
            return False

    def _failed(self, backend: str, call: str, exc: BaseException) -> bool:
        kind, now = classify(exc), self.clock()
        refusal = refusal_of(exc)
        status = refusal.status if refusal is not None else None
        message = refusal.describe() if refusal is not None else one_line(exc)
        if final_for_backend(kind, status):
            self._hold(backend, Hold(kind, message, now), self.policy.hold_s)
            return False
        if kind is ErrorKind.DAILY_LIMIT:
            reset = daily_reset_at(headers_of(exc), now)
            self._hold(backend, Hold(kind, message, now, reset), max(reset - now, 1.0))
            return True
        if (
            kind is ErrorKind.TIMEOUT
            and now - self._answered_at.get(backend, -EVIDENCE_S) < EVIDENCE_S
        ):
            return False  # the gateway answers other calls: a slow request, not an outage
        if kind in UNREACHABLE and self.policy.outage_window_s > 0:
            outage = Hold(ErrorKind.OUTAGE, message, now, now + self.policy.outage_window_s)
            found = self.holds.connect_failed(
                backend, call, outage, window_s=EVIDENCE_S,
                min_calls=self.policy.outage_min_calls,
                ttl_s=self.policy.outage_window_s + EVIDENCE_S,
            )  # fmt: skip
            if found is not None and found.since == now:
                log.warning("backend %s: its gateway looks down (%s); calls pause and probe "
                            "for up to %g s", backend, message,
                            self.policy.outage_window_s)  # fmt: skip
            if found is not None:
                self._clear_until.pop(backend, None)
            return found is not None
        return False

    def _hold(self, backend: str, hold: Hold, ttl_s: float) -> None:
        self.holds.hold(backend, hold, ttl_s)
        self._clear_until.pop(backend, None)
        log.warning("backend %s held (%s): %s", backend, hold.kind,
                    held_message(backend, hold, self.policy))  # fmt: skip

    def answered(self, backend: str, probing: bool) -> None:
        """An attempt got an answer: a probe's, or any while the backend is taken as down
        (a call sent before the outage, slow timeouts that were not one), ends the outage."""
        self._answered_at[backend] = self.clock()
        if not probing:
            hold = self.current(backend)
            if hold is None or hold.kind is not ErrorKind.OUTAGE:
                return
        try:
            self.holds.recovered(backend)
        except STORE_OUTAGES as exc:  # the answer stands; the outage lapses at its end
            log.debug("backend %s: outage not ended, Redis unreachable (%s)", backend, exc)
            return
        log.warning("backend %s: its gateway answers again; calls resume", backend)


def wait_for(
    health: BackendHealth,
    request: CallRequest,
    gate: Gate,
    deadline_of: Callable[[], float | None] = lambda: None,
) -> bool:
    """Wait while the request's backend is paused; BackendHeldError when it is held (or
    its pause outlasts the call's patience, or the job's deadline: ``deadline_of``, asked
    only for a daily limit). True when this call is the outage's probe."""
    backend = request.model.backend
    while (hold := health.current(backend)) is not None:
        deadline = deadline_of() if hold.kind is ErrorKind.DAILY_LIMIT else None
        action, wait_s = verdict(hold, health.clock(), health.policy, deadline)
        if action is Action.FAIL:
            raise BackendHeldError(str(hold.kind), held_message(backend, hold, health.policy))
        if action is Action.PROBE and health.holds.take_probe(backend, health.policy.probe_every_s):
            log.debug("backend %s down: this call probes it", backend)
            return True
        reason = "outage" if action is Action.PROBE else str(hold.kind)
        delay = wait_or_requeue(wait_s, reason, gate.max_wait_s, gate.max_countdown_s,
                                request.may_requeue)  # fmt: skip
        log.debug("backend %s held (%s): waits %.2f s", backend, hold.kind, delay)
        health.sleep(delay)
    return False
