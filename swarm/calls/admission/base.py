"""The admission interface: records, the controller ABC, and a no-op Unlimited controller.

A caller asks ``acquire`` before every gateway attempt; the answer is a Decision that
either carries a Permit (go now) or says how long to wait and why. After the attempt the
caller reports the Outcome with ``finish``: the in-flight lease is released, reserved tokens
are reconciled with the reported usage (or refunded on failure), and a 429 that shows the
tenant at its limit pauses every caller of the model and cuts its shared rate.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import StrEnum
from functools import partial

from swarm.calls.admission.shares import DEFAULT, Tenant, TenantShare
from swarm.catalog import ModelSpec
from swarm.records import DEFAULT_TENANT
from swarm.store.companion import Companion
from swarm.store.outages import STORE_OUTAGES
from swarm.unique import unique_hex

log = logging.getLogger(__name__)


class Refusal(StrEnum):
    """Why an acquire was refused (the limit that said no, or the longest wait of several)."""

    PAUSED = "paused"
    """A 429 paused the model until the gateway's retry time."""
    INFLIGHT = "inflight"
    """max_inflight permits are out."""
    FAIR_SHARE = "fair_share"
    """This job holds its share of max_inflight while other jobs of its tenant wait."""
    TENANT_SHARE = "tenant_share"
    """This tenant has had more than its weighted share of the model's recent tokens while
    another tenant waits (swarm.calls.admission.shares)."""
    RPM = "rpm"
    RPS = "rps"
    TPM = "tpm"


RATE_REFUSALS = frozenset({Refusal.RPM, Refusal.RPS, Refusal.TPM})
"""Refusals by a rate limit: a caller may book a slot past them, and a call that waited
for one is admitted at that limit (Permit.at_limit)."""


@dataclass(frozen=True)
class Permit:
    """Leave to call the gateway once; give it back with ``finish``."""

    model: str
    """Catalog name of the model."""
    lease_id: str
    """Unique id of the in-flight lease (released by id, so finishing twice is harmless)."""
    job_id: str
    """Job the call belongs to (fair share and per-job 429 counts)."""
    tokens_reserved: int
    """Tokens charged to the TPM limit at acquire (prompt estimate + completion estimate)."""
    tenant: str = DEFAULT_TENANT
    """Tenant the call is for."""
    charged: int = 0
    """Tokens charged to the tenant's recent use at acquire (the prompt estimate and the
    completion its tenant's calls have had lately); finish corrects them by the reported
    usage."""
    at_limit: bool = False
    """Admitted at a configured limit: the call filled a window limit, or waited for its
    slot of a rate limit (booked, or refused and asked again). A 429 on it is evidence
    that the tenant is at its limit (see Outcome.exhausted)."""


@dataclass(frozen=True)
class Ask:
    """One call's request for a permit, the same on every try of that call."""

    job_id: str
    """Job the call belongs to (fair share and per-job 429 counts)."""
    tokens: int
    """Tokens to reserve against the TPM limit (prompt estimate + completion budget)."""
    lease_id: str | None = None
    """The same on every try of one call (it counts as one waiter); None: a new one."""
    reserve_s: float = 0.0
    """A call only the rate limits hold back for at most this long is admitted for its
    slot (``Decision.start_in_s``): callers queue in arrival order instead of all asking
    again when the next slot opens; a longer rate wait is refused with the time until the
    slot is within ``reserve_s``."""
    tenant: Tenant = DEFAULT
    """Tenant the call is for."""
    charge: int | None = None
    """What the tenant's recent use is charged now (None: ``tokens``): the part of the
    call known before it runs (its prompt)."""

    @property
    def charged_now(self) -> int:
        """Tokens charged to the tenant's recent use at admission."""
        return self.tokens if self.charge is None else self.charge


@dataclass(frozen=True)
class Decision:
    """The answer of ``acquire``: a permit, or a wait."""

    permit: Permit | None
    """Set when admitted."""
    retry_after_s: float = 0.0
    """When refused: seconds until trying again can succeed (exact for rate limits and
    pauses; a polling hint for in-flight and fair-share refusals; for a tenant-share
    refusal at least the time the waiting tenants need to catch up, shares.catch_up_ms)."""
    reason: Refusal | None = None
    """When refused: which limit refused."""
    start_in_s: float = 0.0
    """When admitted for a booked rate slot (``acquire(reserve_s=...)``): seconds to wait
    before calling. 0 = call now."""


@dataclass(frozen=True)
class Outcome:
    """How an admitted attempt ended."""

    used_tokens: int | None = 0
    """Tokens the gateway reported (prompt + completion); 0 refunds the reservation (failed
    call); None keeps the reservation as charged (answer without usage)."""
    rate_limited: bool = False
    """The gateway answered 429 (the request charge stays). It pauses every caller of the
    model and cuts its rate only on evidence that the tenant is at its limit: ``exhausted``,
    or 429s dense among the model's recent requests (see feedback.tenant_limited); an
    isolated 429 backs off its own call only."""
    retry_after_s: float | None = None
    """The gateway's retry time for a 429 (Retry-After or x-ratelimit reset), if known."""
    completion_tokens: int | None = None
    """Completion tokens the gateway reported (None: no answer, or no usage): the running
    mean of its tenant's completions, charged to its next calls at admission."""
    exhausted: bool = False
    """Evidence that the tenant's limit is used up: an x-ratelimit-remaining-* header at 0
    (on a 429 or on an answer), or a 429 on a call admitted at the configured limit
    (Permit.at_limit). Every caller pauses for ``retry_after_s``; the rate is not cut."""
    failed: bool = False
    """The attempt got no usable answer (any error): no latency point for adaptive limits."""
    timed_out: bool = False
    """The attempt got no answer within the node timeout (a loss for adaptive limits)."""
    sent: bool = True
    """False for a permit given back unused (a booked slot that a pause overtook, a
    backend's permit when the model refused): it is not a request in the model's
    recent-requests count, and its request-rate slots (rpm, rps) are free again."""


@dataclass(frozen=True)
class Verdict:
    """What ``finish`` concluded about the model from the attempt's outcome."""

    paused: bool = False
    """The 429 showed the tenant at its limit: every caller of the model pauses."""


@dataclass(frozen=True)
class ModelCounters:
    """What `swarm status --models` shows for one model (shared by every worker)."""

    admitted: int = 0
    """Permits granted since the counters were created."""
    refused: int = 0
    """Acquires refused (each wait counts once per try)."""
    waiting: int = 0
    """Callers waiting for a permit right now."""
    rate_limited: int = 0
    """429 answers seen by any worker."""
    pauses: int = 0
    """429s taken as the tenant's limit (they paused every caller of the model)."""
    inflight: int = 0
    """Leases out right now."""
    factor: float = 1.0
    """Current share of the catalog rates in use (AIMD; 1.0 = the catalog's limits)."""
    paused_for_s: float = 0.0
    """Seconds left of a 429 pause (0 when not paused)."""
    expired: int = 0
    """Leases that expired instead of being released (a worker died mid-call)."""
    tenants: tuple[TenantShare, ...] = ()
    """Each tenant's recent tokens, its share of them and the share its weight gives it."""


class PendingAcquire(Companion):
    """An acquire sent with a store write (swarm.store.companion): the first permit of a
    call asked in the round trip that claims the call. ``decision`` is set once sent."""

    def __init__(self, lease_id: str, ask: Callable[[], Decision]) -> None:
        self.lease_id = lease_id
        self.decision: Decision | None = None
        self._ask = ask

    def run(self) -> None:
        """Ask alone."""
        self.decision = self._ask()


class PendingFinish(Companion):
    """A ``finish`` sent with a store write (swarm.store.companion): an answered attempt's
    permit finished in the round trip that stores its node's envelope. ``verdict`` is set
    once sent."""

    def __init__(self, finish: Callable[[], Verdict]) -> None:
        self.verdict: Verdict | None = None
        self._finish = finish

    def run(self) -> None:
        """Finish alone; when Redis cannot be reached the permit's lease lapses on its own."""
        try:
            self.verdict = self._finish()
        except STORE_OUTAGES as exc:
            log.debug("admission: a permit not finished, Redis unreachable (%s); it lapses", exc)


class AdmissionController(ABC):
    """Shared per-model admission: rates, tokens, in-flight leases, feedback, fair share."""

    @abstractmethod
    def acquire(self, spec: ModelSpec, ask: Ask) -> Decision:
        """Try to admit the call ``ask`` describes on ``spec``; never blocks."""

    def acquire_later(self, spec: ModelSpec, ask: Ask) -> PendingAcquire:
        """``acquire``, to be sent with a store write; here it is asked alone when the store
        runs it (a controller on the store's Redis queues it in the store's pipeline)."""
        lease_id = ask.lease_id or unique_hex()
        return PendingAcquire(
            lease_id, partial(self.acquire, spec, replace(ask, lease_id=lease_id))
        )

    def finish_later(self, spec: ModelSpec, permit: Permit, outcome: Outcome) -> PendingFinish:
        """``finish``, to be sent with a store write; here it runs alone when the store runs
        it (a controller on the store's Redis queues it in the store's pipeline)."""
        return PendingFinish(partial(self.finish, spec, permit, outcome))

    @abstractmethod
    def finish(self, spec: ModelSpec, permit: Permit, outcome: Outcome) -> Verdict:
        """Release the permit's lease, reconcile or refund its tokens, apply 429 feedback;
        say whether the model paused."""

    @abstractmethod
    def counters(self, spec: ModelSpec) -> ModelCounters:
        """The model's shared counters."""

    @abstractmethod
    def job_rate_limited(self, spec: ModelSpec, job_id: str) -> int:
        """429 answers seen by calls of ``job_id`` on ``spec``."""

    @abstractmethod
    def pause_left_s(self, spec: ModelSpec) -> float:
        """Seconds left of the model's 429 pause (0 when not paused)."""


class Unlimited(AdmissionController):
    """Admits everything and records nothing (the Runtime's default)."""

    def acquire(self, spec: ModelSpec, ask: Ask) -> Decision:
        """Always a permit."""
        permit = Permit(spec.name, ask.lease_id or "unlimited", ask.job_id, ask.tokens,
                        ask.tenant.name, ask.tokens)  # fmt: skip
        return Decision(permit)

    def finish(self, spec: ModelSpec, permit: Permit, outcome: Outcome) -> Verdict:
        """Nothing to release."""
        return Verdict()

    def counters(self, spec: ModelSpec) -> ModelCounters:
        """All zero."""
        return ModelCounters()

    def job_rate_limited(self, spec: ModelSpec, job_id: str) -> int:
        """Not counted."""
        return 0

    def pause_left_s(self, spec: ModelSpec) -> float:
        """Never paused."""
        return 0.0
