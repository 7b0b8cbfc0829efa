"""A Redis hash that every worker of a deployment reads and writes, for what one worker learns
and the others should use (context windows, token scales, generation speeds).

Reads are throttled: at most one HGETALL per ``every_s`` per process, so a hot path can ask
before every call. So are writes of a field: a field put again within ``every_s`` of its
last write is kept in the process and written (the latest value) with the next write or
read that is due, so a value put on every call costs Redis a round trip a second, not one a
call; a field not written for ``every_s`` (a rare one, a context window learned from an
overflow) is written at once. What this process has put and not written yet goes out
before it reads, so a read never brings back an older value of its own. Redis
unreachable: a read gives nothing new and a write is dropped, both logged at DEBUG; the
caller keeps its own in-process values.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
import time
from collections.abc import Callable

import redis

log = logging.getLogger(__name__)

READ_EVERY_S = 1.0
TTL_S = 7 * 86400
"""The hash goes when nothing was learned for a week."""


@dataclasses.dataclass(eq=False)
class SharedHash:
    """One hash: ``read_due`` (throttled), ``read_next`` (unthrottled once), ``put``
    (throttled per field)."""

    client: redis.Redis = dataclasses.field(repr=False)
    key: str
    what: str
    clock: Callable[[], float] = time.monotonic
    every_s: float = READ_EVERY_S
    _read_at: float = dataclasses.field(init=False, default=-math.inf)
    _written_at: dict[str, float] = dataclasses.field(init=False, default_factory=dict)
    _pending: dict[str, str] = dataclasses.field(init=False, default_factory=dict)
    _lock: threading.Lock = dataclasses.field(init=False, default_factory=threading.Lock)

    def read_next(self) -> None:
        """The next ``read_due`` reads, however recent the last read."""
        self._read_at = -math.inf

    def read_due(self) -> dict[str, str] | None:
        """The hash's fields, when the last read is ``every_s`` old; else None (also when
        Redis cannot be reached). What this process put and has not written goes first."""
        now = self.clock()
        with self._lock:
            if now - self._read_at < self.every_s:
                return None
            self._read_at = now
            pending = self._take_pending(now)
        try:
            found = self._write(pending, read=True)
        except redis.RedisError as exc:
            log.debug("%s: Redis unreachable (%s), using this process's values", self.what, exc)
            return None
        return {_text(field): _text(value) for field, value in found.items()}

    def put(self, field: str, value: str) -> None:
        """Set one field and keep the hash for another TTL_S: at once when the field was
        not written for ``every_s``, else with the next write or read that is due."""
        now = self.clock()
        with self._lock:
            self._pending[field] = value
            if now - self._written_at.get(field, -math.inf) < self.every_s:
                return
            pending = self._take_pending(now)
        try:
            self._write(pending, read=False)
        except redis.RedisError as exc:
            log.debug("%s: cannot share %s (%s)", self.what, ", ".join(pending), exc)

    def _take_pending(self, now: float) -> dict[str, str]:
        """The fields put and not written yet, marked written at ``now`` (under the lock)."""
        pending, self._pending = self._pending, {}
        for field in pending:
            self._written_at[field] = now
        return pending

    def _write(self, fields: dict[str, str], *, read: bool) -> dict[bytes | str, bytes | str]:
        """One round trip: ``fields`` set (with the TTL), then with ``read`` the whole hash."""
        if not fields:
            return self.client.hgetall(self.key) if read else {}
        with self.client.pipeline(transaction=False) as pipe:
            pipe.hset(self.key, items=[item for pair in fields.items() for item in pair])
            pipe.expire(self.key, TTL_S)
            if read:
                pipe.hgetall(self.key)
            results = pipe.execute()
        found: dict[bytes | str, bytes | str] = results[-1] if read else {}
        return found


def _text(raw: bytes | str) -> str:
    return raw.decode() if isinstance(raw, bytes) else str(raw)
