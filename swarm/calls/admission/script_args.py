"""Typed arguments of the admission Lua scripts (swarm/calls/admission/lua), one record
per script; fields follow each script's header (see swarm.store.scripts)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from swarm.store.scripts import ScriptArgs, ScriptPart

Limit = tuple[str, float, float, float, int]
"""One rate limit as acquire.lua reads it: name, limit, window ms, burst, windowed 0/1."""


@dataclass(frozen=True)
class _AdmissionScript(ScriptArgs):
    PACKAGE: ClassVar[str] = "swarm.calls.admission"


@dataclass(frozen=True)
class LeaseKeys(ScriptPart):
    """The keys of a model's in-flight leases, KEYS[1..4] of acquire.lua and finish.lua."""

    state: str
    leases: str
    owners: str
    jobs: str


@dataclass(frozen=True)
class AcquireArgs(_AdmissionScript):
    """Admit one call or say how long to wait."""

    SCRIPT: ClassVar[str] = "acquire"
    KEYS: ClassVar[int] = 6
    lease_keys: LeaseKeys
    waiters: str
    waiting_jobs: str
    log: str
    tenants: str
    tenant_waiters: str
    lease_id: str
    job_id: str
    tokens: int
    lease_ms: int
    max_inflight: int
    slack_ms: float
    poll_ms: float
    increase: float
    quiet_ms: float
    reserve_ms: float
    max_poll_ms: float
    tenant: str
    weight: float
    charge: int
    tenant_window_ms: float
    limits: tuple[Limit, ...]


@dataclass(frozen=True)
class PermitFinishArgs(_AdmissionScript):
    """Release a lease, reconcile its tokens, apply 429 feedback."""

    SCRIPT: ClassVar[str] = "finish"
    KEYS: ClassVar[int] = 4
    lease_keys: LeaseKeys
    job_429: str
    log: str
    tenants: str
    lease_id: str
    job_id: str
    token_delta: int
    tpm: float
    tpm_burst: float
    slack_ms: float
    rate_limited: int
    pause_ms: float
    decrease: float
    min_factor: float
    cooldown_ms: float
    counts_ttl_s: int
    sent: int
    exhausted: int
    dense_ms: float
    dense_min: float
    dense_share: float
    lease_ms: int
    tenant_delta: int
    tenant_window_ms: float
    completion: int
    """Completion tokens reported (-1: none): the tenant's running mean of them."""
    request_limits: tuple[Limit, ...]
    """The rate limits a call costs 1 of (rpm, rps): a permit given back unused frees its slot."""


@dataclass(frozen=True)
class PauseArgs(_AdmissionScript):
    """Milliseconds left of the model's 429 pause."""

    SCRIPT: ClassVar[str] = "pause"
    KEYS: ClassVar[int] = 1
    state: str


@dataclass(frozen=True)
class StatsArgs(_AdmissionScript):
    """Read a model's shared counters."""

    SCRIPT: ClassVar[str] = "stats"
    KEYS: ClassVar[int] = 4
    state: str
    leases: str
    waiters: str
    tenants: str


@dataclass(frozen=True)
class KeepArgs(_AdmissionScript):
    """Renew the in-flight leases a worker process holds on one model."""

    SCRIPT: ClassVar[str] = "keep"
    KEYS: ClassVar[int] = 1
    leases: str
    lease_ms: int
    lease_ids: tuple[str, ...]


ADMISSION_SCRIPTS: tuple[type[ScriptArgs], ...] = tuple(_AdmissionScript.__subclasses__())
"""The record of every script in swarm/calls/admission/lua (each class above), as the job
store's STORE_SCRIPTS."""
