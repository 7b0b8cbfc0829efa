"""Recent call latencies per model, shared by every worker through Redis.

The sketch is the last ``window`` latencies of answered calls of a model: a Redis list
(``{llm:<gateway hash>:<model>}:latency``, next to the model's admission keys) trimmed
to ``window`` entries. Each process buffers its observations and pushes them at most once
per ``flush_s``, and reads the list back at most once per ``refresh_s``, so a call costs
no extra round trip. A list of a few hundred numbers is small, exact for the quantiles
hedging needs, and forgets old behaviour by itself; a streaming sketch library would add
a dependency to save a sort of 256 floats per second. Without Redis (embedded mode) the
window lives in the process.
"""

from __future__ import annotations

import threading
import time
from collections import deque

import redis

from swarm.calls.admission.limits import key_prefix
from swarm.calls.hedging.policy import quantile_of

WINDOW = 256
"""Latencies kept per model."""
FLUSH_S = 0.5
"""A process pushes its buffered observations at most this often."""
REFRESH_S = 1.0
"""A process reads the shared window back at most this often."""


class LatencySketch:
    """Observe answered calls' latencies; read a model's recent quantile."""

    def __init__(self, client: redis.Redis | None, gateway: str, window: int = WINDOW) -> None:
        self.client = client
        self.gateway = gateway
        self.window = window
        self._lock = threading.Lock()
        self._pending: dict[str, list[float]] = {}
        self._flushed_at = 0.0
        self._samples: dict[str, deque[float]] = {}
        self._read_at: dict[str, float] = {}

    def _key(self, model: str) -> str:
        return f"{key_prefix(self.gateway, model)}:latency"

    def observe(self, model: str, latency_s: float) -> None:
        """Record one answered call of ``model``."""
        with self._lock:
            local = self._samples.setdefault(model, deque(maxlen=self.window))
            local.append(latency_s)
            if self.client is None:
                return
            self._pending.setdefault(model, []).append(latency_s)
            now = time.monotonic()
            if now - self._flushed_at < FLUSH_S:
                return
            self._flushed_at = now
            pending, self._pending = self._pending, {}
        self._push(pending)

    def _push(self, pending: dict[str, list[float]]) -> None:
        assert self.client is not None
        pipe = self.client.pipeline(transaction=False)
        for model, values in pending.items():
            key = self._key(model)
            pipe.lpush(key, *(f"{v:.4f}" for v in values))
            pipe.ltrim(key, 0, self.window - 1)
        try:
            pipe.execute()
        except redis.RedisError:
            return  # a missed push only makes the window a little older

    def quantile(self, model: str, q: float, min_samples: int) -> float | None:
        """The ``q`` quantile of ``model``'s recent latencies, or None with too few."""
        samples = self._recent(model)
        if len(samples) < min_samples:
            return None
        return quantile_of(samples, q)

    def _recent(self, model: str) -> list[float]:
        with self._lock:
            local = list(self._samples.get(model, ()))
            fresh = time.monotonic() - self._read_at.get(model, -REFRESH_S) < REFRESH_S
            if self.client is None or fresh:
                return local
            self._read_at[model] = time.monotonic()
        try:
            raw = self.client.lrange(self._key(model), 0, self.window - 1)
        except redis.RedisError:
            return local
        shared = [float(v) for v in raw]
        with self._lock:
            self._samples[model] = deque(shared, maxlen=self.window)
        return shared
