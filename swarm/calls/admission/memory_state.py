"""One model's admission state in process, and the steps that change it.

What the Redis keys of one model hold (swarm.calls.admission.redis), kept by the in-process
controller (swarm.calls.admission.memory) under its lock: the leases, waiters, rate
buckets and window log, the tenants' recent use and the 429 feedback, with the same steps
as the Lua scripts (purge, recovery, the window log, a tenant's place, refunds, 429s).
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from dataclasses import dataclass, field

from swarm.calls.admission.base import Outcome
from swarm.calls.admission.feedback import (
    aimd_decrease,
    aimd_increase,
    decayed,
    dense_429s,
    tenant_limited,
)
from swarm.calls.admission.limits import (
    AdmissionPolicy,
    interval_ms,
    model_limits,
    refund_tat,
    window_span_ms,
)
from swarm.calls.admission.shares import (
    Hold,
    Use,
    charged,
    correction,
    held_after_admission,
    held_after_refusal,
    tenant_of,
)
from swarm.catalog import ModelSpec

log = logging.getLogger(__name__)


@dataclass
class ModelState:
    """Everything the Redis keys of one model hold, under ``policy``."""

    policy: AdmissionPolicy
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

    @property
    def window_ms(self) -> float:
        """The tenants' recent-use window (ms)."""
        return self.policy.tenant_window_s * 1000

    def purge(self, now: float) -> None:
        """Forget expired leases (counted) and waiters past their time."""
        dead = [lease for lease, (expiry, _) in self.leases.items() if expiry <= now]
        for lease in dead:
            del self.leases[lease]
            self.logged.pop(lease, None)
        self.expired += len(dead)
        self.waiters = {k: v for k, v in self.waiters.items() if v > now}
        self.waiter_tenant = {k: v for k, v in self.waiter_tenant.items() if k in self.waiters}
        self.waiting_jobs = {k: v for k, v in self.waiting_jobs.items() if v > now}

    def job_inflight(self) -> dict[str, int]:
        """Leases out per job key."""
        return Counter(job for _, job in self.leases.values())

    def recover(self, now: float) -> None:
        """One AIMD step back up after a quiet period."""
        if self.factor < 1 and now - self.factor_at >= self.policy.quiet_s * 1000:
            self.factor = aimd_increase(self.factor, self.policy.increase)
            self.factor_at = now

    def keep_place(self, tenant: str, shift: float, now: float, *, admitted: bool) -> None:
        """A call of ``shift`` admitted lets go of its tenant's hold when it was the held
        one; refused while another tenant waits, it holds its tenant's place."""
        hold = self.holds.get(tenant)
        if admitted:
            hold = held_after_admission(hold, shift, now)
        elif any(tenant_of(k) != tenant for k in self.waiting_jobs):
            hold = held_after_refusal(hold, shift, now)
        if hold is None:
            self.holds.pop(tenant, None)
        else:
            self.holds[tenant] = hold

    def log_admission(self, spec: ModelSpec, now: float, at: float) -> bool:
        """Log an admission at ``at`` for the model's window limits, forgetting old ones;
        False when the model has no window limit (nothing logged)."""
        slack_ms = self.policy.window_slack_s * 1000
        spans = [
            window_span_ms(lim, slack_ms) for lim in model_limits(spec, self.policy) if lim.windowed
        ]
        if not spans:
            return False
        horizon = now - max(spans)
        self.log = sorted([t for t in self.log if t > horizon] + [at])
        return True

    def give_back_slots(self, spec: ModelSpec, lease_id: str, now: float) -> None:
        """A permit given back unused: its request-rate slots are free again (its bucket
        TATs move back one interval, never below now; its window-log entry goes)."""
        at = self.logged.pop(lease_id, None)
        if at is not None and at in self.log:
            self.log.remove(at)
        slack_ms = self.policy.window_slack_s * 1000
        for limit in model_limits(spec, self.policy):
            if limit.tokens or limit.windowed or limit.name not in self.tats:
                continue
            t_ms = interval_ms(limit, self.factor, slack_ms)
            self.tats[limit.name] = refund_tat(self.tats[limit.name], now, -1, t_ms)

    def correct_use(self, lease: tuple[float, str], delta: int, now: float) -> None:
        """Correct the tenant's recent use by the call's ``delta`` (reported - charged)."""
        if delta == 0:
            return
        tenant = tenant_of(lease[1])
        use = self.tenant_use.get(tenant, Use())
        held_ms = now - (lease[0] - self.policy.lease_s * 1000)
        fix = correction(delta, held_ms, self.window_ms)
        self.tenant_use[tenant] = charged(use, now, self.window_ms, fix, use.weight)

    def count_recent(self, outcome: Outcome, now: float) -> None:
        """One more request (a 429 or not) in the decaying recent counts."""
        window_ms = self.policy.dense_window_s * 1000
        elapsed = now - self.recent_at
        self.recent_requests = decayed(self.recent_requests, elapsed, window_ms) + 1
        self.recent_429 = decayed(self.recent_429, elapsed, window_ms) + int(outcome.rate_limited)
        self.recent_at = now

    def hold_all(self, spec: ModelSpec, outcome: Outcome, now: float) -> bool:
        """An answer said a limit is used up: every caller waits for its reset."""
        pause_s = self._pause_all(outcome, now)
        log.debug("admission: %s has a limit used up, every caller waits %.2f s", spec.name,
                  pause_s)  # fmt: skip
        return True

    def _pause_all(self, outcome: Outcome, now: float) -> float:
        """Every caller of the model waits for the reset ``outcome`` names (else the
        default pause) from ``now``; a pause that ends later stays. The pause in seconds."""
        pause_s = outcome.retry_after_s or self.policy.default_pause_s
        self.pauses += 1
        self.pause_until = max(self.pause_until, now + pause_s * 1000)
        return pause_s

    def rate_limited_by(self, spec: ModelSpec, job_id: str, outcome: Outcome, now: float) -> bool:
        """A 429: counted; True (every caller pauses, the rate is cut when 429s are dense)
        on evidence that the tenant is at its limit."""
        policy = self.policy
        self.rate_limited += 1
        self.job_429[job_id] = self.job_429.get(job_id, 0) + 1
        recent = (self.recent_429, self.recent_requests, policy.dense_min, policy.dense_share)
        dense = dense_429s(*recent)
        if not tenant_limited(outcome.exhausted, *recent):
            log.debug("admission: isolated 429 on %s, only its call backs off", spec.name)
            return False
        pause_s = self._pause_all(outcome, now)
        log.debug("admission: %s at its limit, every caller pauses %.2f s", spec.name, pause_s)
        if dense and now - self.decreased_at >= policy.decrease_cooldown_s * 1000:
            self.factor = aimd_decrease(self.factor, policy.decrease, policy.min_factor)
            self.factor_at = self.decreased_at = now
        return True
