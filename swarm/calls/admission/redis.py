"""Admission shared through Redis: every worker on every host asks the same Lua scripts.

One ``acquire`` script checks the 429 pause, the in-flight leases, the job's fair share and
every GCRA limit of the model and commits only when all pass; ``finish`` releases the lease,
reconciles tokens and applies 429 feedback; ``stats`` reads the counters (their arguments:
swarm.calls.admission.redis_args). The scripts ship as
``.lua`` files in this package and run on Redis TIME, so worker clocks do not matter. No
maintained library combines leases that expire with weighted GCRA limits, refunds and a
shared pause (see ../shared notes on rate limits), hence the scripts.
"""

from __future__ import annotations

import logging
import threading
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
from swarm.calls.admission.limits import AdmissionPolicy, adaptive_key
from swarm.calls.admission.redis_args import GatewayArgs
from swarm.calls.admission.script_args import (
    ADMISSION_SCRIPTS,
    AcquireArgs,
    KeepArgs,
    PauseArgs,
    PermitFinishArgs,
    StatsArgs,
)
from swarm.calls.admission.shares import Tenant, TenantShare, Use, shares
from swarm.catalog import ModelSpec
from swarm.store.companion import same_redis
from swarm.store.connect import SentinelOptions, redis_client
from swarm.store.outages import STORE_OUTAGES
from swarm.store.scripts import Scripts

log = logging.getLogger(__name__)


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
        self.args = GatewayArgs(gateway, policy)
        """The scripts' keys and arguments for this gateway."""

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

    def adaptive_key(self, backend: str) -> str:
        """The hash of a backend's adaptive in-flight limit, beside its admission keys."""
        return adaptive_key(self.gateway, backend)

    def acquire(self, spec: ModelSpec, ask: Ask) -> Decision:
        """One round trip: admitted with a lease (now or for a booked slot), or refused
        with the exact wait."""
        return self._run_acquire(self.args.acquire(spec, ask), spec, ask.tenant)

    def acquire_later(self, spec: ModelSpec, ask: Ask) -> PendingAcquire:
        """``acquire`` as a command in the store's pipeline, when the store's Redis is this
        controller's (the store's round trip carries it); asked alone otherwise."""
        return _QueuedAcquire(self, self.args.acquire(spec, ask), spec, ask.tenant)

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
                self._held[(args.lease_keys.leases, args.lease_id)] = None
            return Decision(permit, start_in_s=float(wait_ms) / 1000.0)
        return Decision(None, float(wait_ms) / 1000.0, Refusal(_text(reason)))

    def _run_acquire(self, args: AcquireArgs, spec: ModelSpec, tenant: Tenant) -> Decision:
        return self._decision(args, spec, tenant, self._scripts.run(args))

    def _run_finish(self, args: PermitFinishArgs, spec: ModelSpec, outcome: Outcome) -> Verdict:
        self._let_go(args)
        return self._verdict(spec, outcome, self._scripts.run(args))

    def finish(self, spec: ModelSpec, permit: Permit, outcome: Outcome) -> Verdict:
        """Release, reconcile or refund, and apply 429 feedback, in one round trip."""
        return self._run_finish(self.args.finish(spec, permit, outcome), spec, outcome)

    def finish_later(self, spec: ModelSpec, permit: Permit, outcome: Outcome) -> PendingFinish:
        """``finish`` as a command in the store's pipeline, when the store's Redis is this
        controller's (the round trip that stores the node's envelope carries it); run
        alone otherwise."""
        return _QueuedFinish(self, self.args.finish(spec, permit, outcome), spec, outcome)

    def _let_go(self, args: PermitFinishArgs) -> None:
        """Stop renewing the permit's lease (the finish is on its way)."""
        with self._lock:
            self._held.pop((args.lease_keys.leases, args.lease_id), None)

    def _verdict(self, spec: ModelSpec, outcome: Outcome, reply: Any) -> Verdict:
        _released, paused = reply
        if outcome.rate_limited:
            log.debug("admission: 429 on %s: %s", spec.name,
                      "at its limit, every caller pauses" if int(paused)
                      else "isolated, only its call backs off")  # fmt: skip
        return Verdict(paused=bool(int(paused)))

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
        keys = self.args.keys(spec.name, "state", "leases", "waiters", "tenants")
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
        (key,) = self.args.keys(spec.name, "job429")
        value = self.client.hget(key, job_id)
        return int(value) if value is not None else 0

    def pause_left_s(self, spec: ModelSpec) -> float:
        """One round trip on Redis TIME."""
        (state,) = self.args.keys(spec.name, "state")
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
        self, owner: RedisAdmission, args: PermitFinishArgs, spec: ModelSpec, outcome: Outcome
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
