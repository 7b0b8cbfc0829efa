"""In-process admission: the same rules as the Redis scripts, for one process.

Used by the embedded mode (broker, worker and store all in this process) and by unit tests.
A lock makes each acquire and finish atomic, as the Lua scripts are in Redis; each model's
state and the steps that change it are swarm.calls.admission.memory_state.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable

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
    window_wait_ms,
)
from swarm.calls.admission.memory_state import ModelState
from swarm.calls.admission.shares import (
    Tenant,
    Use,
    call_shift,
    charged,
    completed,
    expected_completion,
    job_key,
    job_over_share,
    share_wait_ms,
    shares,
    standing,
    tenant_of,
)
from swarm.catalog import ModelSpec

log = logging.getLogger(__name__)


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
        self._models: dict[str, ModelState] = {}
        self._ids = itertools.count(1)

    def _state(self, model: str) -> ModelState:
        return self._models.setdefault(model, ModelState(self.policy))

    def acquire(self, spec: ModelSpec, ask: Ask) -> Decision:
        """Admit now or for a booked slot, or refuse with the wait (the longest of the
        limits that refuse)."""
        lease_id, tenant, tokens = ask.lease_id or f"m{next(self._ids)}", ask.tenant, ask.tokens
        key = job_key(tenant.name, ask.job_id)
        with self._lock:
            now, st = self._clock_ms(), self._state(spec.name)
            st.purge(now)
            st.recover(now)
            use = st.tenant_use.get(tenant.name, Use())
            charge = ask.charged_now + round(expected_completion(use))
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
                st.keep_place(tenant.name, shift, now, admitted=False)
                log.debug("admission: %s refused for tenant %s (%s), %.3f s", spec.name,
                          tenant.name, reason, wait_ms / 1000.0)  # fmt: skip
                return Decision(None, wait_ms / 1000.0, reason)
            st.waiters.pop(lease_id, None)
            st.waiter_tenant.pop(lease_id, None)
            st.tats.update(new_tats)
            if st.log_admission(spec, now, now + start_ms):
                st.logged[lease_id] = now + start_ms
            st.leases[lease_id] = (now + start_ms + self.policy.lease_s * 1000, key)
            st.tenant_use[tenant.name] = charged(use, now, st.window_ms, charge, tenant.weight)
            st.keep_place(tenant.name, shift, now, admitted=True)
            st.admitted += 1
            permit = Permit(spec.name, lease_id, ask.job_id, tokens, tenant.name, charge,
                            at_limit=at_limit or start_ms > 0)  # fmt: skip
            return Decision(permit, start_in_s=start_ms / 1000.0)

    def _poll_ms(
        self, spec: ModelSpec, st: ModelState, tenant: Tenant, now: float, preferred: bool
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
        self, spec: ModelSpec, st: ModelState, key: str, tenant: Tenant, tokens: int,
        now: float, shift: float,
    ) -> tuple[list[tuple[float, Refusal]], dict[str, float], bool]:  # fmt: skip
        """Every refusal (wait ms, reason), the TATs to store when there is none, and
        whether an admission now fills a window limit (see Permit.at_limit). ``shift``:
        half the call's charge over its tenant's weight (shares.standing)."""
        new_tats: dict[str, float] = {}
        place = standing(st.tenant_use, st.waiting_jobs, tenant, now, st.window_ms,
                         st.holds, shift)  # fmt: skip
        poll_ms = self._poll_ms(spec, st, tenant, now, place.preferred)
        out: list[tuple[float, Refusal]] = []
        if st.pause_until > now:
            out.append((st.pause_until - now, Refusal.PAUSED))
        if len(st.leases) >= spec.max_inflight:
            out.append((poll_ms, Refusal.INFLIGHT))
        if job_over_share(st.job_inflight(), st.waiting_jobs, key, spec.max_inflight):
            out.append((poll_ms, Refusal.FAIR_SHARE))
        share_wait = share_wait_ms(place, st.tenant_use, now, st.window_ms)
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

    def finish(self, spec: ModelSpec, permit: Permit, outcome: Outcome) -> Verdict:
        """Release, reconcile or refund, and apply 429 feedback."""
        with self._lock:
            now, st = self._clock_ms(), self._state(spec.name)
            lease = st.leases.pop(permit.lease_id, None)
            if lease is not None and not outcome.sent:
                st.give_back_slots(spec, permit.lease_id, now)
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
                st.correct_use(lease, outcome.used_tokens - permit.charged, now)
            if lease is not None and outcome.completion_tokens is not None:
                name = tenant_of(lease[1])
                use = st.tenant_use.get(name, Use())
                st.tenant_use[name] = completed(use, outcome.completion_tokens)
            if outcome.sent:
                st.count_recent(outcome, now)
            if outcome.rate_limited:
                paused = st.rate_limited_by(spec, permit.job_id, outcome, now)
            else:
                paused = outcome.exhausted and outcome.sent and st.hold_all(spec, outcome, now)
            return Verdict(paused=paused)

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
                tenants=shares(st.tenant_use, now, st.window_ms),
            )

    def pause_left_s(self, spec: ModelSpec) -> float:
        """Seconds left of the model's pause in this process."""
        with self._lock:
            return max(0.0, self._state(spec.name).pause_until - self._clock_ms()) / 1000.0

    def job_rate_limited(self, spec: ModelSpec, job_id: str) -> int:
        """429s seen by ``job_id`` on ``spec`` in this process."""
        with self._lock:
            return self._state(spec.name).job_429.get(job_id, 0)
