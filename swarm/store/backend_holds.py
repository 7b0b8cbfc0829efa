"""Holds on a backend, shared by every worker: no call is sent to a backend whose account
is empty or whose key is refused, whose daily limit is used up, or whose gateway is down
(swarm.calls.backend_health decides; this module only keeps the state).

Two holds per backend, each one key: the account's (``insufficient_balance``, ``auth``,
``daily_limit``; cleared by `swarm resume`, or at its end) and the gateway's outage (cleared
by the first answer of a probe). Beside them, the calls that failed to connect lately (a
sorted set by time) and the probe's lock.
"""

from __future__ import annotations

import json
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import asdict, dataclass

import redis

from swarm.records import ErrorKind
from swarm.store.core import ms

PREFIX = "swarm:backend"


@dataclass(frozen=True)
class Hold:
    """Why a backend is held, since when, and until when."""

    kind: ErrorKind
    message: str
    """The provider's refusal or the connection error, on one line."""
    since: float
    """Epoch seconds of the refusal (an outage: of the failure that showed it)."""
    until: float | None = None
    """A daily limit's reset, an outage's end of patience; None: until cleared."""

    def pack(self) -> str:
        """As JSON."""
        return json.dumps(asdict(self))

    @classmethod
    def unpack(cls, raw: str | bytes) -> Hold:
        """``pack``'s JSON back."""
        data = json.loads(raw)
        return cls(ErrorKind(data["kind"]), data["message"], data["since"], data["until"])


class BackendHolds(ABC):
    """The holds of the catalog's backends."""

    @abstractmethod
    def get(self, backend: str) -> Hold | None:
        """The backend's hold in force: the account's first, else the outage's."""

    @abstractmethod
    def hold(self, backend: str, hold: Hold, ttl_s: float) -> None:
        """Hold the backend's account (replacing its hold) for at most ``ttl_s``."""

    @abstractmethod
    def connect_failed(
        self, backend: str, call: str, hold: Hold, *, window_s: float, min_calls: int, ttl_s: float
    ) -> Hold | None:
        """Count ``call``'s connection failure; when ``min_calls`` calls or more failed to
        connect within ``window_s``, the backend's outage (``hold`` unless one is in force,
        kept ``ttl_s``). The outage in force, or None."""

    @abstractmethod
    def take_probe(self, backend: str, ttl_s: float) -> bool:
        """True for one caller per ``ttl_s`` while the backend is down: it sends its request."""

    @abstractmethod
    def recovered(self, backend: str) -> None:
        """The gateway answered: end the outage and forget the failures."""

    @abstractmethod
    def release(self, backends: Iterable[str]) -> None:
        """Drop every hold of ``backends`` (a person paid or fixed the key: resume)."""


class MemoryBackendHolds(BackendHolds):
    """One process's holds (the embedded mode, tests)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holds: dict[tuple[str, str], tuple[Hold, float]] = {}
        self._failed: dict[str, dict[str, float]] = {}
        self._probes: dict[str, float] = {}

    def _live(self, key: tuple[str, str], now: float) -> Hold | None:
        entry = self._holds.get(key)
        if entry is None or entry[1] <= now:
            self._holds.pop(key, None)
            return None
        return entry[0]

    def get(self, backend: str) -> Hold | None:
        now = time.time()
        with self._lock:
            return self._live((backend, "account"), now) or self._live((backend, "outage"), now)

    def hold(self, backend: str, hold: Hold, ttl_s: float) -> None:
        with self._lock:
            self._holds[(backend, "account")] = (hold, time.time() + ttl_s)

    def connect_failed(
        self, backend: str, call: str, hold: Hold, *, window_s: float, min_calls: int, ttl_s: float
    ) -> Hold | None:
        now = time.time()
        with self._lock:
            failed = self._failed.setdefault(backend, {})
            failed[call] = now
            for name, at in list(failed.items()):
                if at < now - window_s:
                    del failed[name]
            current = self._live((backend, "outage"), now)
            if current is None and len(failed) >= min_calls:
                current = hold
                self._holds[(backend, "outage")] = (hold, now + ttl_s)
            return current

    def take_probe(self, backend: str, ttl_s: float) -> bool:
        now = time.time()
        with self._lock:
            if self._probes.get(backend, 0.0) > now:
                return False
            self._probes[backend] = now + ttl_s
            return True

    def recovered(self, backend: str) -> None:
        with self._lock:
            self._holds.pop((backend, "outage"), None)
            self._failed.pop(backend, None)

    def release(self, backends: Iterable[str]) -> None:
        with self._lock:
            for backend in backends:
                for part in ("account", "outage"):
                    self._holds.pop((backend, part), None)
                self._failed.pop(backend, None)


def _key(backend: str, part: str) -> str:
    return f"{PREFIX}:{{{backend}}}:{part}"


class RedisBackendHolds(BackendHolds):
    """The holds in Redis, seen by every worker (keys ``swarm:backend:{NAME}:*``, one
    Cluster slot per backend)."""

    def __init__(self, client: redis.Redis) -> None:
        self.redis = client

    def get(self, backend: str) -> Hold | None:
        raw = self.redis.mget([_key(backend, "account"), _key(backend, "outage")])
        found = next((value for value in raw if value), None)
        return Hold.unpack(found) if found else None

    def hold(self, backend: str, hold: Hold, ttl_s: float) -> None:
        self.redis.set(_key(backend, "account"), hold.pack(), px=ms(ttl_s))

    def connect_failed(
        self, backend: str, call: str, hold: Hold, *, window_s: float, min_calls: int, ttl_s: float
    ) -> Hold | None:
        now = time.time()
        failed = _key(backend, "failed")
        pipe = self.redis.pipeline(transaction=True)
        pipe.zadd(failed, {call: now})
        pipe.zremrangebyscore(failed, "-inf", now - window_s)
        pipe.zcard(failed)
        pipe.pexpire(failed, ms(window_s))
        count = int(pipe.execute()[2])
        outage = _key(backend, "outage")
        if count >= min_calls:
            self.redis.set(outage, hold.pack(), px=ms(ttl_s), nx=True)
        raw = self.redis.get(outage)
        return Hold.unpack(raw) if raw else None

    def take_probe(self, backend: str, ttl_s: float) -> bool:
        return bool(self.redis.set(_key(backend, "probe"), "1", px=ms(ttl_s), nx=True))

    def recovered(self, backend: str) -> None:
        self.redis.delete(_key(backend, "outage"), _key(backend, "failed"))

    def release(self, backends: Iterable[str]) -> None:
        for backend in backends:
            self.redis.delete(*(_key(backend, p) for p in ("account", "outage", "failed")))
