"""Adaptive in-flight limits: a backend's concurrency found from latency.

In the spirit of TCP Vegas and Netflix's concurrency-limits gradient: ``baseline`` is the
latency of calls that ran alone on the backend (no queueing possible), ``recent`` the
latency of every call. Their ratio says how much of a call's time is spent queued behind
others: a server that computes one request at a time answers k calls in flight in about k
times its baseline, a hosted gateway in about its baseline whatever k is. The limit moves
towards ``limit * gradient + headroom``: more in flight while latency stays at the baseline
(throughput still rises), fewer when latency grows with in-flight. A one-slot server settles
between 1 and 2 in flight; a parallel one grows to the models' own limits.

The state is shared by every worker through Redis (one hash per backend, updated with an
optimistic transaction) or kept in process (embedded mode, tests). The arithmetic is pure.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, replace

import redis

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AdaptiveParams:
    """Tuning of the adaptive limit (the defaults suit LLM calls of 0.1 s to a minute)."""

    max_limit: int = 256
    """The limit never grows above this (the backend's models' own limits still apply)."""
    smoothing: float = 0.2
    """Share of a lower target taken per observed call."""
    growth: float = 0.5
    """Share of a higher target taken per observed call (a job's start is not held back
    long: without queueing the limit grows by half per answered call)."""
    baseline_weight: float = 0.5
    """EWMA weight of the newest lone call in the baseline latency (lone calls are rare
    once the limit grows, and the first ones pay for opening connections)."""
    recent_weight: float = 0.2
    """EWMA weight of the newest call in the recent latency."""
    min_gradient: float = 0.5
    """The limit falls at most by half per step (a burst of slow calls is not a collapse)."""
    queueing_gradient: float = 0.9
    """Below this gradient calls are queueing: ``queue_headroom`` (hold at the knee); at or above
    it the target is twice the limit (each call grows it by ``growth``, slow start)."""
    min_lone: int = 2
    """Lone calls needed before the limit moves (the first ones pay for new connections)."""
    queue_headroom: float = 0.5
    """Calls let queue at the server while it queues: a one-slot server settles between 1
    and 2 in flight (limit = headroom + baseline / service time)."""
    tolerance_ms: float = 25.0
    """Latency above the baseline by less than this is noise, not queueing."""


@dataclass(frozen=True)
class AdaptiveState:
    """A backend's adaptive limit and the latencies it is derived from."""

    limit: float = 1.0
    """Calls in flight allowed (rounded when applied; starts at 1 to learn the baseline)."""
    baseline_ms: float | None = None
    """EWMA latency of calls that had the backend to themselves."""
    recent_ms: float | None = None
    """EWMA latency of every call."""
    samples: int = 0
    """Calls observed."""
    lone: int = 0
    """Calls observed that had the backend to themselves (the baseline's samples)."""

    @property
    def inflight_limit(self) -> int:
        """The limit as a number of leases."""
        return max(1, math.floor(self.limit + 0.5))


def _ewma(mean: float | None, value: float, weight: float) -> float:
    return value if mean is None else mean * (1.0 - weight) + value * weight


def observe(
    state: AdaptiveState, latency_ms: float, inflight: int, params: AdaptiveParams
) -> AdaptiveState:
    """The state after one call that took ``latency_ms`` and was admitted with ``inflight``
    calls on the backend (itself included). A call made with the limit mostly unused says
    nothing about more in flight: the limit does not grow on it."""
    latency_ms = max(latency_ms, 0.001)
    alone = inflight <= 1
    baseline = (
        _ewma(state.baseline_ms, latency_ms, params.baseline_weight) if alone else state.baseline_ms
    )
    recent = _ewma(state.recent_ms, latency_ms, params.recent_weight)
    state = replace(state, baseline_ms=baseline, recent_ms=recent, samples=state.samples + 1,
                    lone=state.lone + alone)  # fmt: skip
    if baseline is None or state.lone < params.min_lone:
        return state
    queued_ms = recent - baseline
    ratio = baseline / recent if queued_ms > params.tolerance_ms else 1.0
    gradient = min(1.0, max(params.min_gradient, ratio))
    headroom = params.queue_headroom if gradient < params.queueing_gradient else state.limit
    target = state.limit * gradient + headroom
    step = params.growth if target > state.limit else params.smoothing
    limit = state.limit * (1.0 - step) + target * step
    if inflight < state.limit / 2.0:
        limit = min(limit, state.limit)
    return replace(state, limit=min(float(params.max_limit), max(1.0, limit)))


class AdaptiveLimits(ABC):
    """Adaptive limits of backends, read before admission and fed after each call."""

    @abstractmethod
    def state(self, backend: str) -> AdaptiveState:
        """The backend's current state (may be a fraction of a second old)."""

    @abstractmethod
    def record(self, backend: str, latency_ms: float, inflight: int, max_limit: int) -> None:
        """Feed one finished call, admitted with ``inflight`` calls on the backend."""


class MemoryAdaptive(AdaptiveLimits):
    """Adaptive limits of one process (embedded mode, unit tests)."""

    def __init__(self, params: AdaptiveParams | None = None) -> None:
        self.params = params or AdaptiveParams()
        self._states: dict[str, AdaptiveState] = {}
        self._lock = threading.Lock()

    def state(self, backend: str) -> AdaptiveState:
        """The backend's state."""
        with self._lock:
            return self._states.get(backend, AdaptiveState())

    def record(self, backend: str, latency_ms: float, inflight: int, max_limit: int) -> None:
        """Apply one observation."""
        params = replace(self.params, max_limit=max_limit)
        with self._lock:
            old = self._states.get(backend, AdaptiveState())
            self._states[backend] = new = observe(old, latency_ms, inflight, params)
        _log_change(backend, old, new)


FIELDS = ("limit", "baseline_ms", "recent_ms", "samples", "lone")
STATE_TTL_S = 7 * 86400
"""A backend not called for this long starts again from one call in flight."""
READ_EVERY_S = 0.25
"""A process reads a backend's shared limit at most this often."""


class RedisAdaptive(AdaptiveLimits):
    """Adaptive limits shared by every worker through Redis (``<prefix>:adaptive`` hashes)."""

    def __init__(
        self,
        client: redis.Redis,
        key_of: Callable[[str], str],
        params: AdaptiveParams | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.key_of = key_of
        self.params = params or AdaptiveParams()
        self.clock = clock
        self._cache: dict[str, tuple[float, AdaptiveState]] = {}

    def state(self, backend: str) -> AdaptiveState:
        """The shared state, cached for READ_EVERY_S."""
        cached = self._cache.get(backend)
        now = self.clock()
        if cached is not None and now - cached[0] < READ_EVERY_S:
            return cached[1]
        state = _decode(self.client.hmget(self.key_of(backend), FIELDS))
        self._cache[backend] = (now, state)
        return state

    def record(self, backend: str, latency_ms: float, inflight: int, max_limit: int) -> None:
        """Apply one observation atomically (WATCH/MULTI, retried on a concurrent write)."""
        key = self.key_of(backend)
        params = replace(self.params, max_limit=max_limit)
        changed: list[AdaptiveState] = []

        def update(pipe: redis.client.Pipeline) -> None:
            old = _decode(pipe.hmget(key, FIELDS))
            new = observe(old, latency_ms, inflight, params)
            pipe.multi()
            pipe.hset(key, mapping={name: value for name, value in _encode(new).items()})
            pipe.expire(key, STATE_TTL_S)
            changed[:] = [old, new]

        self.client.transaction(update, key)
        if changed:
            self._cache[backend] = (self.clock(), changed[1])
            _log_change(backend, changed[0], changed[1])


def _decode(values: list[bytes | str | None]) -> AdaptiveState:
    limit, baseline, recent, samples, lone = (
        None if v is None else float(v.decode() if isinstance(v, bytes) else v) for v in values
    )
    return AdaptiveState(
        limit=limit if limit is not None else 1.0,
        baseline_ms=baseline,
        recent_ms=recent,
        samples=int(samples or 0),
        lone=int(lone or 0),
    )


def _encode(state: AdaptiveState) -> dict[str, str]:
    values = {
        "limit": f"{state.limit:.6f}",
        "samples": str(state.samples),
        "lone": str(state.lone),
    }
    if state.baseline_ms is not None:
        values["baseline_ms"] = f"{state.baseline_ms:.3f}"
    if state.recent_ms is not None:
        values["recent_ms"] = f"{state.recent_ms:.3f}"
    return values


def _log_change(backend: str, old: AdaptiveState, new: AdaptiveState) -> None:
    if old.inflight_limit != new.inflight_limit:
        log.debug("adaptive: backend %s in flight %d -> %d (baseline %s ms, recent %.0f ms)",
                  backend, old.inflight_limit, new.inflight_limit,
                  "?" if new.baseline_ms is None else f"{new.baseline_ms:.0f}",
                  new.recent_ms or 0.0)  # fmt: skip
