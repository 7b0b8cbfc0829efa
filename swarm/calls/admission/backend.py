"""Backend limits beside the model limits: a call holds a permit of each.

Models served by one backend share its limits (a local server computing one request at a
time, a tenant's limits across models). The backend is admitted through the same
controller as a model, under its own keys (``backend:<name>``), so its leases, rates and
waiters live apart from every model's. A backend without a configured in-flight limit gets
an adaptive one (``InflightLimits``; swarm.calls.local.adaptive finds it from latency), fed
with the latency of each answered call. A backend's limits never pause on a 429: that
policy stays the model's.
"""

from __future__ import annotations

import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from swarm.backends import BackendSpec
from swarm.calls.admission.base import (
    AdmissionController,
    Ask,
    Decision,
    ModelCounters,
    Outcome,
    PendingAcquire,
    PendingFinish,
    Permit,
    Verdict,
)
from swarm.catalog import Catalog, ModelSpec
from swarm.store.outages import STORE_OUTAGES
from swarm.unique import unique_hex

log = logging.getLogger(__name__)

UNLIMITED = 1_000_000_000
"""Stands for a limit the backend does not have."""
BACKEND_PREFIX = "backend:"


def backend_key(backend: str) -> str:
    """The name a backend's admission state is kept under (beside the models' names)."""
    return f"{BACKEND_PREFIX}{backend}"


def adaptive_cap(catalog: Catalog, backend: BackendSpec) -> int:
    """Highest adaptive limit: the backend's models' in-flight limits together."""
    return max(1, sum(spec.max_inflight for spec in catalog.backend_models(backend.name)))


def backend_as_model(backend: BackendSpec, max_inflight: int | None) -> ModelSpec:
    """The backend's limits in the shape the controllers admit (a model of its own)."""
    return ModelSpec(
        name=backend_key(backend.name),
        gateway_name=backend.name,
        queue="",
        input_per_mtok_usd=0,
        output_per_mtok_usd=0,
        cached_input_per_mtok_usd=0,
        rpm=backend.rpm or UNLIMITED,
        tpm=backend.tpm or UNLIMITED,
        max_inflight=max_inflight or backend.max_inflight or UNLIMITED,
        context_window=UNLIMITED,
        max_tokens=1,
    )


@dataclass(frozen=True)
class Observed:
    """One finished call on an adaptive backend, as its in-flight limit learns from it."""

    latency_ms: float
    """From its admission (its booked slot's start) to its end."""
    inflight: float
    """Calls in flight on the backend over the call's life, itself included."""
    timed_out: bool = False
    """No answer within the node timeout (a loss)."""


class InflightLimits(ABC):
    """In-flight limits of adaptive backends, read before admission and fed after each
    call (swarm.calls.local.adaptive finds them from latency)."""

    @abstractmethod
    def inflight_limit(self, backend: str, max_limit: int) -> int:
        """The backend's current limit (may be a fraction of a second old); a backend not
        observed yet starts at ``max_limit``."""

    @abstractmethod
    def record(self, backend: str, max_limit: int, call: Observed) -> None:
        """Feed one finished call."""


@dataclass(frozen=True)
class _Held:
    spec: ModelSpec
    permit: Permit
    started: float
    inflight: int


UNSENT = Outcome(used_tokens=0, sent=False)
"""The outcome of a permit given back before its request was sent."""


@dataclass(eq=False)
class BackendAdmission(AdmissionController):
    """``inner`` for the models, plus each model's backend limits (adaptive where unset).

    ``adaptive`` is None when no backend of the catalog is adaptive (swarm.calls.local.kit
    builds it only for a catalog that has one): the backends keep their configured limits."""

    inner: AdmissionController
    catalog: Catalog = field(repr=False)
    adaptive: InflightLimits | None
    clock: Callable[[], float] = time.monotonic
    _held: dict[str, _Held] = field(init=False, default_factory=dict)

    def backend_spec(self, backend: BackendSpec) -> ModelSpec:
        """The backend as the inner controller admits it, its adaptive limit applied."""
        limit = None
        if self.adaptive is not None and backend.is_adaptive:  # _adapts, narrowed for mypy
            cap = adaptive_cap(self.catalog, backend)
            limit = min(self.adaptive.inflight_limit(backend.name, cap), cap)
        return backend_as_model(backend, limit)

    def _adapts(self, backend: BackendSpec) -> bool:
        """True when ``backend``'s in-flight limit is the adaptive one."""
        return self.adaptive is not None and backend.is_adaptive

    def acquire(self, spec: ModelSpec, ask: Ask) -> Decision:
        """The backend's permit first, then the model's; a model refusal gives the
        backend's back."""
        backend = self.catalog.backend_of(spec)
        if not backend.has_limits:
            return self.inner.acquire(spec, ask)
        ask = replace(ask, lease_id=ask.lease_id or unique_hex())
        bspec = self.backend_spec(backend)
        first = self.inner.acquire(bspec, ask)
        if first.permit is None:
            return first
        try:
            second = self.inner.acquire(spec, ask)
            if second.permit is None:
                self.inner.finish(bspec, first.permit, UNSENT)
                return second
            start_in_s = max(first.start_in_s, second.start_in_s)
            inflight = self.inner.counters(bspec).inflight if self._adapts(backend) else 0
        except STORE_OUTAGES:  # Redis unreachable: the backend's permit is let go
            self._let_go(bspec, first.permit)
            raise
        held = _Held(bspec, first.permit, self.clock() + start_in_s, inflight)
        self._held[first.permit.lease_id] = held
        return Decision(second.permit, start_in_s=start_in_s)

    def acquire_later(self, spec: ModelSpec, ask: Ask) -> PendingAcquire:
        """The model's own (queued with the store's write) when the backend has no limits;
        otherwise ``acquire`` asked alone when the store runs it."""
        if self.catalog.backend_of(spec).has_limits:
            return super().acquire_later(spec, ask)
        return self.inner.acquire_later(spec, ask)

    def _let_go(self, spec: ModelSpec, permit: Permit) -> None:
        """Give ``permit`` back, or at least stop renewing it (it lapses) when Redis
        cannot be reached: a permit this process still renews counts in flight for good."""
        try:
            self.inner.finish(spec, permit, UNSENT)
        except STORE_OUTAGES as exc:
            log.debug("admission: %s's permit left to lapse (%s)", spec.name, exc)

    def finish_later(self, spec: ModelSpec, permit: Permit, outcome: Outcome) -> PendingFinish:
        """The model's own (queued with the store's write) when the backend holds no permit
        of this call; otherwise ``finish`` run alone when the store runs it."""
        if permit.lease_id in self._held:
            return super().finish_later(spec, permit, outcome)
        return self.inner.finish_later(spec, permit, outcome)

    def finish(self, spec: ModelSpec, permit: Permit, outcome: Outcome) -> Verdict:
        """The model's permit, then the backend's; an answered call feeds the adaptive
        limit with its latency. The verdict (a pause) is the model's. When
        Redis cannot be reached the backend's permit is still let go (not renewed any more,
        it lapses), or the heartbeat would keep it in flight for good."""
        try:
            verdict = self.inner.finish(spec, permit, outcome)
        except STORE_OUTAGES:
            self._release_backend(spec, permit, outcome)
            raise
        self._release_backend(spec, permit, outcome)
        return verdict

    def _release_backend(self, spec: ModelSpec, permit: Permit, outcome: Outcome) -> None:
        held = self._held.pop(permit.lease_id, None)
        if held is None:
            return
        backend = self.catalog.backend_of(spec)
        answered = outcome.sent and not outcome.failed and outcome.used_tokens != 0
        observed = self._adapts(backend) and (answered or outcome.timed_out)
        # the calls in flight over the call's life: at its admission and at its end (a
        # server does not always serve calls in the order they were admitted)
        released = Outcome(used_tokens=outcome.used_tokens, sent=outcome.sent)
        try:
            ending = self.inner.counters(held.spec).inflight if observed else 0
        finally:  # released (or let lapse) even when the count cannot be read
            self.inner.finish(held.spec, held.permit, released)
        if observed and self.adaptive is not None:
            latency_ms = max(0.0, self.clock() - held.started) * 1000.0
            cap = adaptive_cap(self.catalog, backend)
            inflight = (held.inflight + max(ending, 1)) / 2.0
            point = Observed(latency_ms, inflight, outcome.timed_out)
            self.adaptive.record(backend.name, cap, point)

    def counters(self, spec: ModelSpec) -> ModelCounters:
        """The model's counters."""
        return self.inner.counters(spec)

    def backend_counters(self, backend: BackendSpec) -> ModelCounters:
        """The backend's own counters (its leases are every model's calls to it)."""
        return self.inner.counters(self.backend_spec(backend))

    def job_rate_limited(self, spec: ModelSpec, job_id: str) -> int:
        """429s of the job on the model."""
        return self.inner.job_rate_limited(spec, job_id)

    def pause_left_s(self, spec: ModelSpec) -> float:
        """The model's 429 pause."""
        return self.inner.pause_left_s(spec)
