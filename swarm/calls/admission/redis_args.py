"""What the Redis controller (swarm.calls.admission.redis) sends the admission scripts for
one gateway: its key names, each model's limits as the scripts read them, and each script's
arguments (swarm.calls.admission.script_args) built from an ask, a permit and an outcome.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from swarm.calls.admission.base import Ask, Outcome, Permit
from swarm.calls.admission.limits import AdmissionPolicy, Limit, key_prefix, model_limits
from swarm.calls.admission.script_args import AcquireArgs, LeaseKeys, PermitFinishArgs
from swarm.calls.admission.script_args import Limit as ScriptLimit
from swarm.catalog import ModelSpec
from swarm.unique import unique_hex

JOB_COUNTS_TTL_S = 7 * 86400
"""How long per-job 429 counts are kept after the last 429."""


@dataclass(frozen=True)
class ScriptLimits:
    """One model's rate limits as acquire.lua and finish.lua read them."""

    script: tuple[ScriptLimit, ...]
    requests: tuple[ScriptLimit, ...]
    """The limits a call costs 1 of (finish.lua's request_limits)."""
    tpm: Limit


class GatewayArgs:
    """The admission scripts' arguments for the gateway ``gateway`` under ``policy``."""

    def __init__(self, gateway: str, policy: AdmissionPolicy) -> None:
        self.gateway = gateway
        self.policy = policy
        self._limits: dict[tuple[object, ...], ScriptLimits] = {}

    def keys(self, model: str, *names: str) -> list[str]:
        """The keys ``names`` of ``model`` (one Redis Cluster slot, limits.key_prefix)."""
        prefix = key_prefix(self.gateway, model)
        return [f"{prefix}:{name}" for name in names]

    def lease_keys(self, model: str) -> LeaseKeys:
        """The keys of ``model``'s in-flight leases."""
        return LeaseKeys(*self.keys(model, "state", "leases", "owners", "jobs"))

    def limits(self, spec: ModelSpec) -> ScriptLimits:
        """The model's limits as the scripts read them, built once per set of rates."""
        rates = (spec.rpm, spec.rps, spec.tpm, spec.limit_window)
        found = self._limits.get(rates)
        if found is None:
            limits = model_limits(spec, self.policy)
            found = ScriptLimits(
                script=script_limits(limits),
                requests=script_limits(lim for lim in limits if not lim.tokens),
                tpm=next(lim for lim in limits if lim.name == "tpm"),
            )
            self._limits[rates] = found
        return found

    def acquire(self, spec: ModelSpec, ask: Ask) -> AcquireArgs:
        """The acquire script's arguments for ``ask`` on ``spec``."""
        policy = self.policy
        waiters, wjobs, log, tenants = self.keys(spec.name, "waiters", "wjobs", "log", "tenants")
        return AcquireArgs(
            lease_keys=self.lease_keys(spec.name),
            waiters=waiters,
            waiting_jobs=wjobs,
            log=log,
            tenants=tenants,
            tenant_waiters=self.keys(spec.name, f"waiters:{ask.tenant.name}")[0],
            lease_id=ask.lease_id or unique_hex(),
            job_id=ask.job_id,
            tokens=ask.tokens,
            lease_ms=int(policy.lease_s * 1000),
            max_inflight=spec.max_inflight,
            slack_ms=policy.window_slack_s * 1000,
            poll_ms=policy.poll_s * 1000,
            increase=policy.increase,
            quiet_ms=policy.quiet_s * 1000,
            reserve_ms=ask.reserve_s * 1000,
            max_poll_ms=policy.max_poll_s * 1000,
            tenant=ask.tenant.name,
            weight=ask.tenant.weight,
            charge=ask.charged_now,
            tenant_window_ms=policy.tenant_window_s * 1000,
            limits=self.limits(spec).script,
        )

    def finish(self, spec: ModelSpec, permit: Permit, outcome: Outcome) -> PermitFinishArgs:
        """The finish script's arguments for ``permit`` after ``outcome``."""
        policy = self.policy
        used = outcome.used_tokens
        delta = 0 if used is None else used - permit.tokens_reserved
        tenant_delta = 0 if used is None else used - permit.charged
        pause_s = outcome.retry_after_s or policy.default_pause_s
        limits = self.limits(spec)
        tpm = limits.tpm
        job429, window_log, tenants = self.keys(spec.name, "job429", "log", "tenants")
        return PermitFinishArgs(
            lease_keys=self.lease_keys(spec.name),
            job_429=job429,
            log=window_log,
            tenants=tenants,
            lease_id=permit.lease_id,
            job_id=permit.job_id,
            token_delta=delta,
            tenant_delta=tenant_delta,
            tpm=tpm.limit,
            tpm_burst=tpm.burst,
            slack_ms=policy.window_slack_s * 1000,
            rate_limited=1 if outcome.rate_limited else 0,
            pause_ms=pause_s * 1000,
            decrease=policy.decrease,
            min_factor=policy.min_factor,
            cooldown_ms=policy.decrease_cooldown_s * 1000,
            counts_ttl_s=JOB_COUNTS_TTL_S,
            sent=1 if outcome.sent else 0,
            exhausted=1 if outcome.exhausted else 0,
            dense_ms=policy.dense_window_s * 1000,
            dense_min=policy.dense_min,
            dense_share=policy.dense_share,
            lease_ms=int(policy.lease_s * 1000),
            tenant_window_ms=policy.tenant_window_s * 1000,
            completion=-1 if outcome.completion_tokens is None else outcome.completion_tokens,
            request_limits=limits.requests,
        )


def script_limits(limits: Iterable[Limit]) -> tuple[ScriptLimit, ...]:
    """Rate limits as the admission scripts read them (name, limit, window ms, burst,
    windowed 0/1)."""
    return tuple(
        (lim.name, lim.limit, lim.window_ms, lim.burst, int(lim.windowed)) for lim in limits
    )
