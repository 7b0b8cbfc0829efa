"""In-process admission: the same rules as the Redis scripts, for one process.

Used by the embedded mode (broker, worker and store all in this process) and by unit tests.
A lock makes each acquire and finish atomic, as the Lua scripts are in Redis.
"""

from __future__ import annotations

import itertools
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from swarm.calls.admission.base import (
    RATE_REFUSALS,
    AdmissionController,
    Ask,
    Decision,
    ModelCounters,
    Outcome,
    Permit,
    Refusal,
    Verdict,
)
from swarm.calls.admission.feedback import (
    aimd_decrease,
    aimd_increase,
    decayed,
    dense_429s,
    tenant_limited,
)
from swarm.calls.admission.limits import (
    AdmissionPolicy,
    gcra,
    hold_mean_ms,
    interval_ms,
    model_limits,
    refund_tat,
    release_mean_ms,
    slot_poll_ms,
    window_fills,
    window_span_ms,
    window_wait_ms,
)
from swarm.calls.admission.shares import (
    Hold,
    Tenant,
    Use,
    call_shift,
    charged,
    completed,
    correction,
    expected_completion,
    held_after_admission,
    held_after_refusal,
    job_key,
    job_over_share,
    share_wait_ms,
    shares,
    standing,
    tenant_of,
)
from swarm.catalog import ModelSpec

log = logging.getLogger(__name__)


@dataclass
class _ModelState:
    """Everything the Redis keys of one model hold."""

    tats: dict[str, float] = field(default_factory=dict)
    log: list[float] = field(default_factory=list)
    """Admission times (ms, sorted) for window limits, at most the longest window old."""
    logged: dict[str, float] = field(default_factory=dict)
    """lease id -> its admission time in ``log``, while its lease is out."""
    leases: dict[str, tuple[float, str]] = field(default_factory=dict)
    """lease id -> (expiry ms, job key: tenant and job, shares.job_key)."""
    waiters: dict[str, float] = field(default_factory=dict)
    """lease id -> until when its caller counts as waiting."""
    waiter_tenant: dict[str, str] = field(default_factory=dict)
    """lease id -> the tenant of the waiting caller (acquire.lua's per-tenant waiters)."""
    waiting_jobs: dict[str, float] = field(default_factory=dict)
    """job key -> until when it counts as waiting."""
    tenant_use: dict[str, Use] = field(default_factory=dict)
    """tenant -> its recent token use (shares.Use)."""
    holds: dict[str, Hold] = field(default_factory=dict)
    """tenant -> its largest call refused lately while another tenant waits (shares.Hold)."""
    job_429: dict[str, int] = field(default_factory=dict)
    factor: float = 1.0
    factor_at: float = 0.0
    decreased_at: float = -math.inf
    pause_until: float = 0.0
    released_at: float | None = None
    release_dt: float | None = None
    """Mean time between lease releases (ms), for in-flight waiters' retry hints."""
    hold_ms: float | None = None
    """Mean time calls hold their lease (ms): when the oldest call out should end."""
    recent_requests: float = 0.0
    """Requests answered lately (decaying, see feedback.decayed)."""
    recent_429: float = 0.0
    """429 answers lately (decaying the same way)."""
    recent_at: float = 0.0
    admitted: int = 0
    refused: int = 0
    rate_limited: int = 0
    pauses: int = 0
    expired: int = 0

    def purge(self, now: float) -> None:
        dead = [lease for lease, (expiry, _) in self.leases.items() if expiry <= now]
        for lease in dead:
            del self.leases[lease]
            self.logged.pop(lease, None)
        self.expired += len(dead)
        self.waiters = {k: v for k, v in self.waiters.items() if v > now}
        self.waiter_tenant = {k: v for k, v in self.waiter_tenant.items() if k in self.waiters}
        self.waiting_jobs = {k: v for k, v in self.waiting_jobs.items() if v > now}

    def job_inflight(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for _, job in self.leases.values():
            counts[job] = counts.get(job, 0) + 1
        return counts


def beyond_reserve(wait_ms: float, reserve_s: float) -> float:
    """Retry time of a rate wait past the reserve: when the slot is within reach, but not
    before half the reserve has gone by (as acquire.lua does)."""
    if reserve_s <= 0:
        return wait_ms
    return max(wait_ms - reserve_s * 1000, reserve_s * 500)


class MemoryAdmission(AdmissionController):
    """Admission for the models of one process; ``clock_ms`` is injectable for tests."""

    def __init__(
        self, policy: AdmissionPolicy, clock_ms: Callable[[], float] | None = None
    ) -> None:
        self.policy = policy
        self._clock_ms = clock_ms or (lambda: time.monotonic() * 1000.0)
        self._lock = threading.Lock()
        self._models: dict[str, _ModelState] = {}
        self._ids = itertools.count(1)

    def _state(self, model: str) -> _ModelState:
        return self._models.setdefault(model, _ModelState())

    def acquire(self, spec: ModelSpec, ask: Ask) -> Decision:
        """Admit now or for a booked slot, or refuse with the wait (the longest of the
        limits that refuse)."""
        lease_id, tenant, tokens = ask.lease_id or f"m{next(self._ids)}", ask.tenant, ask.tokens
        key = job_key(tenant.name, ask.job_id)
        with self._lock:
            now, st = self._clock_ms(), self._state(spec.name)
            st.purge(now)
            self._recover(st, now)
            use = st.tenant_use.get(tenant.name, Use())
            charge = ask.charged + round(expected_completion(use))
            shift = call_shift(charge, tenant.weight)
            refusals, new_tats, at_limit = self._check(spec, st, key, tenant, tokens, now, shift)
            wait_ms, reason = max(refusals, key=lambda r: r[0], default=(0.0, None))
            start_ms = 0.0
            if all(why in RATE_REFUSALS for _, why in refusals):  # only rates: may book
                if wait_ms <= ask.reserve_s * 1000:
                    start_ms, reason = wait_ms, None
                else:
                    wait_ms = beyond_reserve(wait_ms, ask.reserve_s)
            if reason is not None:
                until = now + wait_ms + self.policy.poll_s * 4000 + 1000
                st.waiters[lease_id] = until
                st.waiter_tenant[lease_id] = tenant.name
                st.waiting_jobs[key] = max(until, st.waiting_jobs.get(key, 0.0))
                st.refused += 1
                self._keep_place(st, tenant.name, shift, now, admitted=False)
                log.debug("admission: %s refused for tenant %s (%s), %.3f s", spec.name,
                          tenant.name, reason, wait_ms / 1000.0)  # fmt: skip
                return Decision(None, wait_ms / 1000.0, reason)
            st.waiters.pop(lease_id, None)
            st.waiter_tenant.pop(lease_id, None)
            st.tats.update(new_tats)
            if self._log(spec, st, now, now + start_ms):
                st.logged[lease_id] = now + start_ms
            st.leases[lease_id] = (now + start_ms + self.policy.lease_s * 1000, key)
            st.tenant_use[tenant.name] = charged(use, now, self._window_ms, charge, tenant.weight)
            self._keep_place(st, tenant.name, shift, now, admitted=True)
            st.admitted += 1
            permit = Permit(spec.name, lease_id, ask.job_id, tokens, tenant.name, charge,
                            at_limit=at_limit or start_ms > 0)  # fmt: skip
            return Decision(permit, start_in_s=start_ms / 1000.0)

    def _keep_place(self, st: _ModelState, tenant: str, shift: float, now: float, *,
              admitted: bool) -> None:  # fmt: skip
        """A call of ``shift`` admitted lets go of its tenant's hold when it was the held
        one; refused while another tenant waits, it holds its tenant's place."""
        hold = st.holds.get(tenant)
        if admitted:
            hold = held_after_admission(hold, shift, now)
        elif any(tenant_of(k) != tenant for k in st.waiting_jobs):
            hold = held_after_refusal(hold, shift, now)
        if hold is None:
            st.holds.pop(tenant, None)
        else:
            st.holds[tenant] = hold

    def _recover(self, st: _ModelState, now: float) -> None:
        if st.factor < 1 and now - st.factor_at >= self.policy.quiet_s * 1000:
            st.factor = aimd_increase(st.factor, self.policy.increase)
            st.factor_at = now

    @property
    def _window_ms(self) -> float:
        return self.policy.tenant_window_s * 1000

    def _poll_ms(
        self, spec: ModelSpec, st: _ModelState, tenant: Tenant, now: float, preferred: bool
    ) -> float:
        """The retry hint of a count wait (acquire.lua's slot_poll): the waiters counted
        are the tenant's own while it is ``preferred`` (shares.Standing), else all."""
        next_end = None
        if st.leases and st.hold_ms is not None:
            oldest_start = min(exp for exp, _ in st.leases.values()) - self.policy.lease_s * 1000
            next_end = oldest_start + st.hold_ms - now
        waiters = len(st.waiters)
        if preferred:
            waiters = sum(1 for name in st.waiter_tenant.values() if name == tenant.name)
        return slot_poll_ms(
            self.policy.poll_s * 1000,
            self.policy.max_poll_s * 1000,
            waiters,
            st.release_dt or 0.0,
            next_end,
            spec.max_inflight,
        )

    def _check(
        self, spec: ModelSpec, st: _ModelState, key: str, tenant: Tenant, tokens: int,
        now: float, shift: float,
    ) -> tuple[list[tuple[float, Refusal]], dict[str, float], bool]:  # fmt: skip
        """Every refusal (wait ms, reason), the TATs to store when there is none, and
        whether an admission now fills a window limit (see Permit.at_limit). ``shift``:
        half the call's charge over its tenant's weight (shares.standing)."""
        new_tats: dict[str, float] = {}
        place = standing(st.tenant_use, st.waiting_jobs, tenant, now, self._window_ms,
                         st.holds, shift)  # fmt: skip
        poll_ms = self._poll_ms(spec, st, tenant, now, place.preferred)
        out: list[tuple[float, Refusal]] = []
        if st.pause_until > now:
            out.append((st.pause_until - now, Refusal.PAUSED))
        if len(st.leases) >= spec.max_inflight:
            out.append((poll_ms, Refusal.INFLIGHT))
        if job_over_share(st.job_inflight(), st.waiting_jobs, key, spec.max_inflight):
            out.append((poll_ms, Refusal.FAIR_SHARE))
        share_wait = share_wait_ms(place, st.tenant_use, now, self._window_ms)
        if share_wait > 0 and len(st.leases) < spec.max_inflight:  # full: it waits a permit
            out.append((max(poll_ms, share_wait), Refusal.TENANT_SHARE))
        slack_ms = self.policy.window_slack_s * 1000
        at_limit = False
        for limit in model_limits(spec, self.policy):
            if limit.windowed:
                at_limit |= window_fills(st.log, now, limit, slack_ms)
                if (wait := window_wait_ms(st.log, now, limit, slack_ms)) > 0:
                    out.append((wait, Refusal(limit.name)))
                continue
            cost = tokens if limit.tokens else 1
            t_ms = interval_ms(limit, st.factor, slack_ms)
            wait_ms, new_tats[limit.name] = gcra(
                st.tats.get(limit.name, 0.0), now, cost, t_ms, limit.burst
            )
            if wait_ms > 0:
                out.append((wait_ms, Refusal(limit.name)))
        return out, new_tats, at_limit

    def _log(self, spec: ModelSpec, st: _ModelState, now: float, at: float) -> bool:
        """Log an admission at ``at`` for the model's window limits, forgetting old ones;
        False when the model has no window limit (nothing logged)."""
        slack_ms = self.policy.window_slack_s * 1000
        spans = [
            window_span_ms(lim, slack_ms) for lim in model_limits(spec, self.policy) if lim.windowed
        ]
        if not spans:
            return False
        horizon = now - max(spans)
        st.log = sorted([t for t in st.log if t > horizon] + [at])
        return True

    def _give_back_slots(self, spec: ModelSpec, st: _ModelState, lease_id: str, now: float) -> None:
        """A permit given back unused: its request-rate slots are free again (its bucket
        TATs move back one interval, never below now; its window-log entry goes)."""
        at = st.logged.pop(lease_id, None)
        if at is not None and at in st.log:
            st.log.remove(at)
        slack_ms = self.policy.window_slack_s * 1000
        for limit in model_limits(spec, self.policy):
            if limit.tokens or limit.windowed or limit.name not in st.tats:
                continue
            t_ms = interval_ms(limit, st.factor, slack_ms)
            st.tats[limit.name] = refund_tat(st.tats[limit.name], now, -1, t_ms)

    def finish(self, spec: ModelSpec, permit: Permit, outcome: Outcome) -> Verdict:
        """Release, reconcile or refund, and apply 429 feedback."""
        with self._lock:
            now, st = self._clock_ms(), self._state(spec.name)
            lease = st.leases.pop(permit.lease_id, None)
            released = lease is not None
            if released and not outcome.sent:
                self._give_back_slots(spec, st, permit.lease_id, now)
            st.logged.pop(permit.lease_id, None)
            if lease is not None and outcome.sent:  # a permit given back unused holds nothing
                started = lease[0] - self.policy.lease_s * 1000
                st.hold_ms = hold_mean_ms(st.hold_ms, now - started)
                if st.released_at is not None:
                    st.release_dt = release_mean_ms(st.release_dt, now - st.released_at)
                st.released_at = now
            if lease is not None and outcome.used_tokens is not None:
                delta = outcome.used_tokens - permit.tokens_reserved
                tpm = next(lim for lim in model_limits(spec, self.policy) if lim.name == "tpm")
                t_ms = interval_ms(tpm, st.factor, self.policy.window_slack_s * 1000)
                st.tats["tpm"] = refund_tat(st.tats.get("tpm", 0.0), now, delta, t_ms)
                self._correct_use(st, lease, outcome.used_tokens - permit.charged, now)
            if lease is not None and outcome.completion_tokens is not None:
                name = tenant_of(lease[1])
                use = st.tenant_use.get(name, Use())
                st.tenant_use[name] = completed(use, outcome.completion_tokens)
            if outcome.sent:
                self._count_recent(st, outcome, now)
            if outcome.rate_limited:
                paused = self._feedback(spec, st, permit.job_id, outcome, now)
            else:
                paused = outcome.exhausted and outcome.sent and self._hold(spec, st, outcome, now)
            return Verdict(paused=paused)

    def _correct_use(
        self, st: _ModelState, lease: tuple[float, str], delta: int, now: float
    ) -> None:
        """Correct the tenant's recent use by the call's ``delta`` (reported - charged)."""
        if delta == 0:
            return
        tenant = tenant_of(lease[1])
        use = st.tenant_use.get(tenant, Use())
        held_ms = now - (lease[0] - self.policy.lease_s * 1000)
        fix = correction(delta, held_ms, self._window_ms)
        st.tenant_use[tenant] = charged(use, now, self._window_ms, fix, use.weight)

    def _hold(self, spec: ModelSpec, st: _ModelState, outcome: Outcome, now: float) -> bool:
        """An answer said a limit is used up: every caller waits for its reset."""
        pause_s = outcome.retry_after_s or self.policy.default_pause_s
        log.debug("admission: %s has a limit used up, every caller waits %.2f s", spec.name,
                  pause_s)  # fmt: skip
        st.pauses += 1
        st.pause_until = max(st.pause_until, now + pause_s * 1000)
        return True

    def _count_recent(self, st: _ModelState, outcome: Outcome, now: float) -> None:
        window_ms = self.policy.dense_window_s * 1000
        elapsed = now - st.recent_at
        st.recent_requests = decayed(st.recent_requests, elapsed, window_ms) + 1
        st.recent_429 = decayed(st.recent_429, elapsed, window_ms) + int(outcome.rate_limited)
        st.recent_at = now

    def _feedback(
        self, spec: ModelSpec, st: _ModelState, job_id: str, outcome: Outcome, now: float
    ) -> bool:
        policy = self.policy
        st.rate_limited += 1
        st.job_429[job_id] = st.job_429.get(job_id, 0) + 1
        recent = (st.recent_429, st.recent_requests, policy.dense_min, policy.dense_share)
        dense = dense_429s(*recent)
        if not tenant_limited(outcome.exhausted, *recent):
            log.debug("admission: isolated 429 on %s, only its call backs off", spec.name)
            return False
        st.pauses += 1
        pause_s = outcome.retry_after_s or policy.default_pause_s
        log.debug("admission: %s at its limit, every caller pauses %.2f s", spec.name, pause_s)
        st.pause_until = max(st.pause_until, now + pause_s * 1000)
        if dense and now - st.decreased_at >= policy.decrease_cooldown_s * 1000:
            st.factor = aimd_decrease(st.factor, policy.decrease, policy.min_factor)
            st.factor_at = st.decreased_at = now
        return True

    def counters(self, spec: ModelSpec) -> ModelCounters:
        """This process's counters for the model."""
        with self._lock:
            now, st = self._clock_ms(), self._state(spec.name)
            return ModelCounters(
                admitted=st.admitted,
                refused=st.refused,
                waiting=sum(1 for v in st.waiters.values() if v > now),
                rate_limited=st.rate_limited,
                pauses=st.pauses,
                inflight=sum(1 for exp, _ in st.leases.values() if exp > now),
                factor=st.factor,
                paused_for_s=max(0.0, st.pause_until - now) / 1000.0,
                expired=st.expired,
                tenants=shares(st.tenant_use, now, self._window_ms),
            )

    def pause_left_s(self, spec: ModelSpec) -> float:
        """Seconds left of the model's pause in this process."""
        with self._lock:
            return max(0.0, self._state(spec.name).pause_until - self._clock_ms()) / 1000.0

    def job_rate_limited(self, spec: ModelSpec, job_id: str) -> int:
        """429s seen by ``job_id`` on ``spec`` in this process."""
        with self._lock:
            return self._state(spec.name).job_429.get(job_id, 0)
