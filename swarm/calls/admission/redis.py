"""Admission shared through Redis: every worker on every host asks the same Lua scripts.

One ``acquire`` script checks the 429 pause, the in-flight leases, the job's fair share and
every GCRA limit of the model and commits only when all pass; ``finish`` releases the lease,
reconciles tokens and applies 429 feedback; ``stats`` reads the counters. The scripts ship as
``.lua`` files in this package and run on Redis TIME, so worker clocks do not matter. No
maintained library combines leases that expire with weighted GCRA limits, refunds and a
shared pause (see ../shared notes on rate limits), hence the scripts.
"""

from __future__ import annotations

import uuid
from importlib import resources
from typing import Any

import redis

from swarm.calls.admission.base import (
    AdmissionController,
    Decision,
    ModelCounters,
    Outcome,
    Permit,
    Refusal,
)
from swarm.calls.admission.limits import AdmissionPolicy, key_prefix, model_limits
from swarm.catalog import ModelSpec

JOB_COUNTS_TTL_S = 7 * 86400
"""How long per-job 429 counts are kept after the last 429."""


def _script(client: redis.Redis, name: str) -> Any:
    text = resources.files("swarm.calls.admission").joinpath("lua", name).read_text("utf-8")
    return client.register_script(text)


class RedisAdmission(AdmissionController):
    """Admission for one gateway (``gateway`` is its base URL), shared through Redis."""

    def __init__(self, client: redis.Redis, gateway: str, policy: AdmissionPolicy) -> None:
        self.client = client
        self.gateway = gateway
        self.policy = policy
        self._acquire = _script(client, "acquire.lua")
        self._finish = _script(client, "finish.lua")
        self._stats = _script(client, "stats.lua")
        self._pause = _script(client, "pause.lua")

    @classmethod
    def from_url(cls, url: str, gateway: str, policy: AdmissionPolicy) -> RedisAdmission:
        """A controller on the Redis at ``url`` (the job store's Redis)."""
        # One connection per calling thread at most (see swarm.store.redis.MAX_CONNECTIONS).
        client = redis.Redis.from_url(
            url, socket_timeout=10, health_check_interval=30, max_connections=1024
        )
        return cls(client, gateway, policy)

    def _keys(self, model: str, *names: str) -> list[str]:
        prefix = key_prefix(self.gateway, model)
        return [f"{prefix}:{name}" for name in names]

    def acquire(
        self,
        spec: ModelSpec,
        job_id: str,
        tokens: int,
        lease_id: str | None = None,
        reserve_s: float = 0.0,
    ) -> Decision:
        """One round trip: admitted with a lease (now or for a booked slot), or refused
        with the exact wait."""
        policy = self.policy
        lease_id = lease_id or uuid.uuid4().hex
        keys = self._keys(spec.name, "state", "leases", "owners", "jobs", "waiters", "wjobs")
        args: list[Any] = [
            lease_id,
            job_id,
            tokens,
            int(policy.lease_s * 1000),
            spec.max_inflight,
            policy.window_slack_s * 1000,
            policy.poll_s * 1000,
            policy.increase,
            policy.quiet_s * 1000,
            reserve_s * 1000,
            policy.max_poll_s * 1000,
        ]
        for limit in model_limits(spec, policy):
            args += [limit.name, limit.limit, limit.window_ms, limit.burst]
        admitted, wait_ms, reason, _inflight, _factor = self._acquire(keys=keys, args=args)
        if int(admitted):
            start_in_s = float(wait_ms) / 1000.0
            return Decision(Permit(spec.name, lease_id, job_id, tokens), start_in_s=start_in_s)
        return Decision(None, float(wait_ms) / 1000.0, Refusal(_text(reason)))

    def finish(self, spec: ModelSpec, permit: Permit, outcome: Outcome) -> None:
        """Release, reconcile or refund, and apply 429 feedback, in one round trip."""
        policy = self.policy
        delta = 0 if outcome.used_tokens is None else outcome.used_tokens - permit.tokens_reserved
        pause_s = outcome.retry_after_s or policy.default_pause_s
        tpm = next(lim for lim in model_limits(spec, policy) if lim.name == "tpm")
        keys = self._keys(spec.name, "state", "leases", "owners", "jobs", "job429")
        args: list[Any] = [
            permit.lease_id,
            permit.job_id,
            delta,
            tpm.limit,
            tpm.burst,
            policy.window_slack_s * 1000,
            1 if outcome.rate_limited else 0,
            pause_s * 1000,
            policy.decrease,
            policy.min_factor,
            policy.decrease_cooldown_s * 1000,
            JOB_COUNTS_TTL_S,
        ]
        self._finish(keys=keys, args=args)

    def counters(self, spec: ModelSpec) -> ModelCounters:
        """The model's counters as every worker sees them."""
        keys = self._keys(spec.name, "state", "leases", "waiters")
        values = self._stats(keys=keys, args=[])
        admitted, refused, limited, expired, inflight, waiting = (int(v) for v in values[:6])
        return ModelCounters(
            admitted=admitted,
            refused=refused,
            waiting=waiting,
            rate_limited=limited,
            inflight=inflight,
            factor=float(values[6]),
            paused_for_s=float(values[7]) / 1000.0,
            expired=expired,
        )

    def job_rate_limited(self, spec: ModelSpec, job_id: str) -> int:
        """429s seen by ``job_id`` on ``spec``."""
        (key,) = self._keys(spec.name, "job429")
        value = self.client.hget(key, job_id)
        return int(value) if value is not None else 0

    def pause_left_s(self, spec: ModelSpec) -> float:
        """One round trip on Redis TIME."""
        return float(self._pause(keys=self._keys(spec.name, "state"), args=[])) / 1000.0


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
