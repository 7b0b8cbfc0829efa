"""Adaptive in-flight limits: a backend's concurrency found from latency.

In the spirit of TCP Vegas and Netflix's concurrency-limits gradient, with the gradient
measured directly: how a call's latency grows with the calls in flight when it was
admitted. A backend starts at its configured limit (the cap: its models' own limits
together), so a hosted gateway keeps the limits the catalog gives it from the first call.
Each answered call adds a point (calls in flight k, latency L) to an exponentially
weighted least-squares line ``L = a + b k``:

- a server that computes one request at a time answers k calls in k times its service
  time: the line goes through the origin (``b`` about the latency of a lone call, ``a + b``)
  and k explains L (high r squared). That is queueing: the limit moves to the knee, where
  latency exceeds a lone call's by ``queue_headroom`` (``1 + headroom x (a + b) / b``), so
  a one-slot server settles between 1 and 2 in flight within a few answers, shrinking
  from what is in use rather than from an unused cap;
- a hosted gateway answers in about the same time whatever k is: a flat line, or one k
  does not explain (answer lengths vary far more than queueing adds), so its limit never
  moves; nor does a slope smaller than ``serial_share`` of a lone call per extra call (the
  client's own CPU on a fast simulator);
- otherwise (no slope, or calls that all had the same k) each answered call that had the
  limit in use probes one more in flight (TCP's additive increase).

A call that timed out is a loss (as in TCP): the limit in use halves, and grows back only
slowly within one call of where the loss happened (a server on which two calls in flight
time out, because reading two long prompts takes longer than the timeout, stays at one,
probing a second now and then). Servers with a few
slots fit the line less well (it sees the knee only from above); set their max_inflight.

The state is shared by every worker through Redis (one hash per backend, updated with an
optimistic transaction) or kept in process (embedded mode, tests). The arithmetic is pure.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from abc import abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, fields, replace

import redis

from swarm.calls.admission.backend import InflightLimits, Observed
from swarm.calls.admission.limits import ewma

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AdaptiveParams:
    """Tuning of the adaptive limit (the defaults suit LLM calls of 0.1 s to a minute)."""

    max_limit: int = 256
    """The limit never grows above this (the backend's models' own limits still apply)."""
    decay: float = 0.8
    """Weight left to the earlier calls' points per new call (about the last five count:
    an outlier, such as a call whose connection was new, is soon forgotten)."""
    min_weight: float = 2.4
    """Points (decayed) needed before the line says anything (three calls)."""
    min_spread: float = 0.1
    """Variance of k below which the calls all had the same k (no slope to see)."""
    min_r2: float = 0.3
    """Share of the latency's variance k must explain to count as queueing."""
    serial_share: float = 0.3
    """Queueing needs a slope of at least this share of a lone call's latency per extra
    call in flight (a one-slot server's slope is a whole lone call)."""
    queue_headroom: float = 0.5
    """Latency over a lone call's allowed at the knee, in lone calls: a one-slot server
    settles at 1.5 (between 1 and 2 in flight)."""
    shrink: float = 0.5
    """Share of a lower target taken per call."""
    growth: float = 0.5
    """Share of a higher target taken per call: half a call more in flight per answered call that
    had the limit in use (the limit only grows again after it came down)."""
    loss_backoff: float = 0.5
    """A call that timed out multiplies the limit in use by this (TCP's loss response)."""
    careful_growth: float = 0.1
    """Share of ``growth`` left within one call of the in-flight level of the last timeout
    (the limit creeps back towards where calls timed out instead of running into it)."""


@dataclass(frozen=True)
class AdaptiveState:
    """A backend's adaptive limit and the weighted sums of its (k, latency) points."""

    limit: float = 1.0
    """Calls in flight allowed (rounded when applied; a backend not seen yet starts at its
    cap, see ``AdaptiveState.start``)."""
    samples: int = 0
    """Calls observed."""
    w: float = 0.0
    """Sum of the points' weights."""
    k: float = 0.0
    """Weighted sum of k (calls in flight over a call's life, itself included)."""
    ms: float = 0.0
    """Weighted sum of latencies (ms)."""
    kk: float = 0.0
    """Weighted sum of k squared."""
    kms: float = 0.0
    """Weighted sum of k x latency."""
    msms: float = 0.0
    """Weighted sum of latency squared."""
    ceiling: float = 0.0
    """Calls in flight when a call last timed out (0: none did); the limit grows slowly
    near it, and it rises with a limit that crept past it."""

    @classmethod
    def start(cls, limit: int) -> AdaptiveState:
        """A backend not observed yet: its configured limit, nothing learned."""
        return cls(limit=float(limit))

    @property
    def inflight_limit(self) -> int:
        """The limit as a number of leases."""
        return max(1, math.floor(self.limit + 0.5))

    @property
    def load(self) -> float:
        """Mean calls in flight of the recent points (0 before any)."""
        return self.k / self.w if self.w > 0 else 0.0


@dataclass(frozen=True)
class Line:
    """The fitted ``latency = a + b k`` and how well k explains latency."""

    a: float
    b: float
    r2: float
    spread: float
    """Variance of k among the points."""

    @property
    def lone_ms(self) -> float:
        """Latency of a call alone on the backend."""
        return self.a + self.b


def fit(state: AdaptiveState) -> Line | None:
    """The weighted least-squares line through the state's points (None: too few)."""
    if state.w <= 0:
        return None
    mk, mms = state.k / state.w, state.ms / state.w
    var_k = max(0.0, state.kk / state.w - mk * mk)
    var_ms = max(0.0, state.msms / state.w - mms * mms)
    cov = state.kms / state.w - mk * mms
    if var_k <= 0:
        return Line(mms, 0.0, 0.0, 0.0)
    b = cov / var_k
    r2 = cov * cov / (var_k * var_ms) if var_ms > 0 else 0.0
    return Line(mms - b * mk, b, r2, var_k)


def _add(state: AdaptiveState, k: float, ms: float, decay: float) -> AdaptiveState:
    return replace(
        state,
        samples=state.samples + 1,
        w=state.w * decay + 1.0,
        k=state.k * decay + k,
        ms=state.ms * decay + ms,
        kk=state.kk * decay + k * k,
        kms=state.kms * decay + k * ms,
        msms=state.msms * decay + ms * ms,
    )


def target_of(state: AdaptiveState, line: Line, params: AdaptiveParams) -> float:
    """Where the limit heads given the line through the recent points."""
    lone = line.lone_ms
    queueing = line.b > 0 and line.r2 >= params.min_r2 and line.b >= params.serial_share * lone
    if queueing and line.spread >= params.min_spread:
        return 1.0 + params.queue_headroom * max(lone, 0.0) / line.b
    return state.limit + 1.0  # no sign of queueing: probe one more


def observe(
    state: AdaptiveState,
    latency_ms: float,
    inflight: float,
    params: AdaptiveParams,
    timed_out: bool = False,
) -> AdaptiveState:
    """The state after one call that had ``inflight`` calls on the backend (itself
    included; the mean of its admission's and its end's) and was answered in
    ``latency_ms``, or ``timed_out``. A call made with the
    limit mostly unused says nothing about more in flight: the limit does not grow on it."""
    k = max(1.0, float(inflight))
    in_use = min(state.limit, max(state.load, k))
    if timed_out:
        limit = min(state.limit, max(1.0, in_use * params.loss_backoff))
        return replace(state, limit=limit, samples=state.samples + 1, ceiling=in_use)
    state = _add(state, k, max(latency_ms, 0.001), params.decay)
    line = fit(state)
    if line is None or state.w < params.min_weight:
        return state
    target = target_of(state, line, params)
    if target < state.limit:
        start = min(state.limit, max(in_use, target))
        limit = ewma(start, target, params.shrink)
    elif k >= state.limit / 2.0:
        near_loss = state.ceiling > 0 and state.limit + 1.0 >= state.ceiling
        growth = params.growth * (params.careful_growth if near_loss else 1.0)
        limit = ewma(state.limit, target, growth)
    else:
        limit = state.limit
    limit = min(float(params.max_limit), max(1.0, limit))
    return replace(state, limit=limit, ceiling=max(state.ceiling, limit) if state.ceiling else 0.0)


Step = Callable[[AdaptiveState], AdaptiveState]
"""One observation applied to a backend's state."""


class AdaptiveLimits(InflightLimits):
    """Adaptive limits of backends, read before admission and fed after each call."""

    params: AdaptiveParams

    @abstractmethod
    def state(self, backend: str, max_limit: int) -> AdaptiveState:
        """The backend's current state (may be a fraction of a second old); a backend not
        observed yet starts at ``max_limit``."""

    @abstractmethod
    def _update(self, backend: str, max_limit: int, step: Step) -> tuple[AdaptiveState, ...]:
        """Apply ``step`` to the backend's state atomically; (old, new), or () when it
        was not applied."""

    def inflight_limit(self, backend: str, max_limit: int) -> int:
        """The backend's state's limit."""
        return self.state(backend, max_limit).inflight_limit

    def record(self, backend: str, max_limit: int, call: Observed) -> None:
        """Apply one observation (``observe``)."""
        params = replace(self.params, max_limit=max_limit)
        changed = self._update(
            backend,
            max_limit,
            lambda old: observe(old, call.latency_ms, call.inflight, params, call.timed_out),
        )
        if changed:
            _log_change(backend, *changed)


class MemoryAdaptive(AdaptiveLimits):
    """Adaptive limits of one process (embedded mode, unit tests)."""

    def __init__(self, params: AdaptiveParams | None = None) -> None:
        self.params = params or AdaptiveParams()
        self._states: dict[str, AdaptiveState] = {}
        self._lock = threading.Lock()

    def state(self, backend: str, max_limit: int) -> AdaptiveState:
        """The backend's state."""
        with self._lock:
            return self._states.get(backend, AdaptiveState.start(max_limit))

    def _update(self, backend: str, max_limit: int, step: Step) -> tuple[AdaptiveState, ...]:
        with self._lock:
            old = self._states.get(backend, AdaptiveState.start(max_limit))
            self._states[backend] = new = step(old)
        return old, new


FIELDS = tuple(f.name for f in fields(AdaptiveState))
STATE_TTL_S = 7 * 86400
"""A backend not called for this long starts again from its cap."""
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

    def state(self, backend: str, max_limit: int) -> AdaptiveState:
        """The shared state, cached for READ_EVERY_S."""
        cached = self._cache.get(backend)
        now = self.clock()
        if cached is not None and now - cached[0] < READ_EVERY_S:
            return cached[1]
        state = _decode(self.client.hmget(self.key_of(backend), FIELDS), max_limit)
        self._cache[backend] = (now, state)
        return state

    def _update(self, backend: str, max_limit: int, step: Step) -> tuple[AdaptiveState, ...]:
        """Atomically (WATCH/MULTI, retried on a concurrent write)."""
        key = self.key_of(backend)
        changed: list[AdaptiveState] = []

        def update(pipe: redis.client.Pipeline) -> None:
            old = _decode(pipe.hmget(key, FIELDS), max_limit)
            new = step(old)
            pipe.multi()
            pipe.hset(key, mapping={name: value for name, value in _encode(new).items()})
            pipe.expire(key, STATE_TTL_S)
            changed[:] = [old, new]

        self.client.transaction(update, key)
        if changed:
            self._cache[backend] = (self.clock(), changed[1])
        return tuple(changed)


def _decode(values: list[bytes | str | None], max_limit: int) -> AdaptiveState:
    """A state from the hash's FIELDS, in order (absent fields: a fresh backend's)."""
    found = {
        name: float(v.decode() if isinstance(v, bytes) else v)
        for name, v in zip(FIELDS, values, strict=True)
        if v is not None
    }
    samples = int(found.pop("samples", 0))
    return replace(AdaptiveState.start(max_limit), samples=samples, **found)


def _encode(state: AdaptiveState) -> dict[str, str]:
    return {name: repr(getattr(state, name)) for name in FIELDS}


def _log_change(backend: str, old: AdaptiveState, new: AdaptiveState) -> None:
    if old.inflight_limit != new.inflight_limit:
        line = fit(new)
        shape = "?" if line is None else f"{line.a:.0f} + {line.b:.0f} x k ms, r2 {line.r2:.2f}"
        log.debug("adaptive: backend %s in flight %d -> %d (latency %s)", backend,
                  old.inflight_limit, new.inflight_limit, shape)  # fmt: skip
