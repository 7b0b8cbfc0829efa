"""Admission shared through Redis: every worker on every host asks the same Lua scripts.

One ``acquire`` script checks the 429 pause, the in-flight leases, the job's fair share and
every GCRA limit of the model and commits only when all pass; ``finish`` releases the lease,
reconciles tokens and applies 429 feedback; ``stats`` reads the counters. The scripts ship as
``.lua`` files in this package and run on Redis TIME, so worker clocks do not matter. No
maintained library combines leases that expire with weighted GCRA limits, refunds and a
shared pause (see ../shared notes on rate limits), hence the scripts.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any

import redis

from swarm.calls.admission.base import (
    AdmissionController,
    Ask,
    Decision,
    ModelCounters,
    Outcome,
    PendingAcquire,
    PendingFinish,
    Permit,
    Refusal,
    Verdict,
)
from swarm.calls.admission.limits import (
    AdmissionPolicy,
    Limit,
    adaptive_key,
    key_prefix,
    model_limits,
)
from swarm.calls.admission.script_args import (
    ADMISSION_SCRIPTS,
    AcquireArgs,
    FinishArgs,
    KeepArgs,
    PauseArgs,
    StatsArgs,
)
from swarm.calls.admission.script_args import Limit as ScriptLimit
from swarm.calls.admission.shares import Tenant, TenantShare, Use, shares
from swarm.catalog import ModelSpec
from swarm.store.companion import same_redis
from swarm.store.connect import SentinelOptions, redis_client
from swarm.store.outages import STORE_OUTAGES
from swarm.store.scripts import Scripts
from swarm.unique import unique_hex

log = logging.getLogger(__name__)

JOB_COUNTS_TTL_S = 7 * 86400
"""How long per-job 429 counts are kept after the last 429."""


@dataclass(frozen=True)
class _ScriptLimits:
    """One model's rate limits as acquire.lua and finish.lua read them."""

    script: tuple[ScriptLimit, ...]
    requests: tuple[ScriptLimit, ...]
    """The limits a call costs 1 of (finish.lua's request_limits)."""
    tpm: Limit


class RedisAdmission(AdmissionController):
    """Admission for one gateway (``gateway`` is its base URL), shared through Redis."""

    def __init__(self, client: redis.Redis, gateway: str, policy: AdmissionPolicy) -> None:
        self.client = client
        self.gateway = gateway
        self.policy = policy
        self._scripts = Scripts(client, *ADMISSION_SCRIPTS)
        self._held: dict[tuple[str, str], None] = {}
        """(leases key, lease id) of the permits this process holds, for ``keep_held``."""
        self._lock = threading.Lock()
        self._script_limits: dict[tuple[object, ...], _ScriptLimits] = {}

    @classmethod
    def from_url(
        cls,
        url: str,
        gateway: str,
        policy: AdmissionPolicy,
        sentinel: SentinelOptions | None = None,
    ) -> RedisAdmission:
        """A controller on the Redis at ``url`` (the job store's Redis, plain or
        ``sentinel://``, swarm.store.connect)."""
        # One connection per calling thread at most (see swarm.store.redis.MAX_CONNECTIONS).
        client = redis_client(
            url, sentinel, socket_timeout=10, health_check_interval=30, max_connections=1024
        )
        return cls(client, gateway, policy)

    def _limits(self, spec: ModelSpec) -> _ScriptLimits:
        """The model's limits as the scripts read them, built once per set of rates."""
        rates = (spec.rpm, spec.rps, spec.tpm, spec.limit_window)
        found = self._script_limits.get(rates)
        if found is None:
            limits = model_limits(spec, self.policy)
            found = _ScriptLimits(
                script=script_limits(limits),
                requests=script_limits(lim for lim in limits if not lim.tokens),
                tpm=next(lim for lim in limits if lim.name == "tpm"),
            )
            self._script_limits[rates] = found
        return found

    def adaptive_key(self, backend: str) -> str:
        """The hash of a backend's adaptive in-flight limit, beside its admission keys."""
        return adaptive_key(self.gateway, backend)

    def _keys(self, model: str, *names: str) -> list[str]:
        prefix = key_prefix(self.gateway, model)
        return [f"{prefix}:{name}" for name in names]

    def acquire(self, spec: ModelSpec, ask: Ask) -> Decision:
        """One round trip: admitted with a lease (now or for a booked slot), or refused
        with the exact wait."""
        args = self._acquire_args(spec, ask)
        return self._decision(args, spec, ask.tenant, self._scripts.run(args))

    def acquire_later(self, spec: ModelSpec, ask: Ask) -> PendingAcquire:
        """``acquire`` as a command in the store's pipeline, when the store's Redis is this
        controller's (the store's round trip carries it); asked alone otherwise."""
        return _QueuedAcquire(self, self._acquire_args(spec, ask), spec, ask.tenant)

    def _acquire_args(self, spec: ModelSpec, ask: Ask) -> AcquireArgs:
        policy = self.policy
        state, leases, owners, jobs, waiters, wjobs, log, tenants = self._keys(
            spec.name, "state", "leases", "owners", "jobs", "waiters", "wjobs", "log", "tenants"
        )
        return AcquireArgs(
            state=state,
            leases=leases,
            owners=owners,
            jobs=jobs,
            waiters=waiters,
            waiting_jobs=wjobs,
            log=log,
            tenants=tenants,
            tenant_waiters=self._keys(spec.name, f"waiters:{ask.tenant.name}")[0],
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
            charge=ask.charged,
            tenant_window_ms=policy.tenant_window_s * 1000,
            limits=self._limits(spec).script,
        )

    def _decision(self, args: AcquireArgs, spec: ModelSpec, tenant: Tenant, reply: Any) -> Decision:
        """The acquire script's reply as a Decision; an admitted lease is held (renewed by
        ``keep_held``) from here on."""
        admitted, wait_ms, reason, _inflight, _factor, expected = reply
        if int(admitted):
            at_limit = _text(reason) in ("at_limit", "reserved")
            permit = Permit(
                spec.name, args.lease_id, args.job_id, args.tokens, tenant.name,
                args.charge + int(expected), at_limit=at_limit,
            )  # fmt: skip
            with self._lock:
                self._held[(args.leases, args.lease_id)] = None
            return Decision(permit, start_in_s=float(wait_ms) / 1000.0)
        return Decision(None, float(wait_ms) / 1000.0, Refusal(_text(reason)))

    def _run_acquire(self, args: AcquireArgs, spec: ModelSpec, tenant: Tenant) -> Decision:
        return self._decision(args, spec, tenant, self._scripts.run(args))

    def _run_finish(self, args: FinishArgs, spec: ModelSpec, outcome: Outcome) -> Verdict:
        self._let_go(args)
        return self._verdict(spec, outcome, self._scripts.run(args))

    def finish(self, spec: ModelSpec, permit: Permit, outcome: Outcome) -> Verdict:
        """Release, reconcile or refund, and apply 429 feedback, in one round trip."""
        args = self._finish_args(spec, permit, outcome)
        self._let_go(args)
        return self._verdict(spec, outcome, self._scripts.run(args))

    def finish_later(self, spec: ModelSpec, permit: Permit, outcome: Outcome) -> PendingFinish:
        """``finish`` as a command in the store's pipeline, when the store's Redis is this
        controller's (the round trip that stores the node's envelope carries it); run
        alone otherwise."""
        return _QueuedFinish(self, self._finish_args(spec, permit, outcome), spec, outcome)

    def _let_go(self, args: FinishArgs) -> None:
        """Stop renewing the permit's lease (the finish is on its way)."""
        with self._lock:
            self._held.pop((args.leases, args.lease_id), None)

    def _verdict(self, spec: ModelSpec, outcome: Outcome, reply: Any) -> Verdict:
        _released, paused = reply
        if outcome.rate_limited:
            log.debug("admission: 429 on %s: %s", spec.name,
                      "at its limit, every caller pauses" if int(paused)
                      else "isolated, only its call backs off")  # fmt: skip
        return Verdict(paused=bool(int(paused)))

    def _finish_args(self, spec: ModelSpec, permit: Permit, outcome: Outcome) -> FinishArgs:
        policy = self.policy
        used = outcome.used_tokens
        delta = 0 if used is None else used - permit.tokens_reserved
        tenant_delta = 0 if used is None else used - permit.charged
        pause_s = outcome.retry_after_s or policy.default_pause_s
        limits = self._limits(spec)
        tpm = limits.tpm
        state, leases, owners, jobs, job429, window_log, tenants = self._keys(
            spec.name, "state", "leases", "owners", "jobs", "job429", "log", "tenants"
        )
        return FinishArgs(
            state=state,
            leases=leases,
            owners=owners,
            jobs=jobs,
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

    def keep_held(self) -> int:
        """Renew the in-flight lease of every permit this process holds, for ``lease_s``
        from now (one script per model, pipelined); how many were renewed. A worker's
        heartbeat calls it every third of a lease, so a permit lives only a few seconds past
        its worker (killed, frozen, cut off), whatever the longest call."""
        with self._lock:
            held = list(self._held)
        if not held:
            return 0
        by_key: dict[str, list[str]] = {}
        for key, lease_id in held:
            by_key.setdefault(key, []).append(lease_id)
        lease_ms = int(self.policy.lease_s * 1000)
        pipe = self.client.pipeline(transaction=False)
        for key, ids in by_key.items():
            self._scripts.run(KeepArgs(key, lease_ms, tuple(ids)), client=pipe)
        return sum(int(n) for n in pipe.execute())

    def counters(self, spec: ModelSpec) -> ModelCounters:
        """The model's counters as every worker sees them."""
        keys = self._keys(spec.name, "state", "leases", "waiters", "tenants")
        values = self._scripts.run(StatsArgs(*keys))
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
            pauses=int(values[8]),
            tenants=self._shares(float(values[9]), values[10]),
        )

    def _shares(self, now_ms: float, fields: list[Any]) -> tuple[TenantShare, ...]:
        """The tenants' shares from the tenants hash (a flat list of field, value)."""
        uses = {}
        for name, value in zip(fields[::2], fields[1::2], strict=True):
            tokens, at_ms, weight, *completion = (float(part) for part in _text(value).split())
            uses[_text(name)] = Use(tokens, at_ms, weight, *completion[:1])
        return shares(uses, now_ms, self.policy.tenant_window_s * 1000)

    def job_rate_limited(self, spec: ModelSpec, job_id: str) -> int:
        """429s seen by ``job_id`` on ``spec``."""
        (key,) = self._keys(spec.name, "job429")
        value = self.client.hget(key, job_id)
        return int(value) if value is not None else 0

    def pause_left_s(self, spec: ModelSpec) -> float:
        """One round trip on Redis TIME."""
        (state,) = self._keys(spec.name, "state")
        return float(self._scripts.run(PauseArgs(state))) / 1000.0


class _QueuedAcquire(PendingAcquire):
    """An acquire that goes in the store's pipeline when that pipeline is on this
    controller's Redis."""

    def __init__(
        self, owner: RedisAdmission, args: AcquireArgs, spec: ModelSpec, tenant: Tenant
    ) -> None:
        super().__init__(args.lease_id, partial(owner._run_acquire, args, spec, tenant))
        self._owner, self._args, self._spec, self._tenant = owner, args, spec, tenant

    def queue(self, pipe: Any) -> bool:
        if not same_redis(pipe, self._owner.client):
            return False
        self._owner._scripts.queue(self._args, pipe)
        return True

    def take(self, reply: Any) -> None:
        owner, args = self._owner, self._args
        self.decision = owner._decision(args, self._spec, self._tenant,
                                        owner._scripts.reply(args, reply))  # fmt: skip


TAKE_ERRORS: tuple[type[Exception], ...] = (*STORE_OUTAGES, redis.ResponseError)
"""What a queued finish's reply may be that leaves its permit to lapse."""


class _QueuedFinish(PendingFinish):
    """A finish that goes in the store's pipeline when that pipeline is on this
    controller's Redis."""

    def __init__(
        self, owner: RedisAdmission, args: FinishArgs, spec: ModelSpec, outcome: Outcome
    ) -> None:
        super().__init__(partial(owner._run_finish, args, spec, outcome))
        self._owner, self._args, self._spec, self._outcome = owner, args, spec, outcome

    def queue(self, pipe: Any) -> bool:
        if not same_redis(pipe, self._owner.client):
            return False
        self._owner._let_go(self._args)
        self._owner._scripts.queue(self._args, pipe)
        return True

    def take(self, reply: Any) -> None:
        owner, args = self._owner, self._args
        try:
            verdict = owner._verdict(self._spec, self._outcome, owner._scripts.reply(args, reply))
        except TAKE_ERRORS as exc:  # never fails the store's write
            log.debug("admission: %s's permit not finished (%s); it lapses", self._spec.name, exc)
            return
        self.verdict = verdict
        if self.verdict.paused:
            log.debug("admission: %s says a limit is used up: every caller waits %.2f s",
                      self._spec.name, self._outcome.retry_after_s or 0.0)  # fmt: skip


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def script_limits(limits: Iterable[Limit]) -> tuple[ScriptLimit, ...]:
    """Rate limits as the admission scripts read them (name, limit, window ms, burst,
    windowed 0/1)."""
    return tuple(
        (lim.name, lim.limit, lim.window_ms, lim.burst, int(lim.windowed)) for lim in limits
    )
