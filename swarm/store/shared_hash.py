"""A Redis hash that every worker of a deployment reads and writes, for what one worker learns
and the others should use (context windows, token scales, generation speeds).

Reads are throttled: at most one HGETALL per ``every_s`` per process, so a hot path can ask
before every call. Redis unreachable: a read gives nothing new and a write is dropped, both
logged at DEBUG; the caller keeps its own in-process values.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable

import redis

log = logging.getLogger(__name__)

READ_EVERY_S = 1.0
TTL_S = 7 * 86400
"""The hash goes when nothing was learned for a week."""


class SharedHash:
    """One hash: ``read_due`` (throttled), ``read_next`` (unthrottled once), ``put``."""

    def __init__(
        self,
        client: redis.Redis,
        key: str,
        what: str,
        clock: Callable[[], float] = time.monotonic,
        every_s: float = READ_EVERY_S,
    ) -> None:
        self.client = client
        self.key = key
        self.what = what
        self.clock = clock
        self.every_s = every_s
        self._read_at = -math.inf

    def read_next(self) -> None:
        """The next ``read_due`` reads, however recent the last read."""
        self._read_at = -math.inf

    def read_due(self) -> dict[str, str] | None:
        """The hash's fields, when the last read is ``every_s`` old; else None (also when
        Redis cannot be reached)."""
        now = self.clock()
        if now - self._read_at < self.every_s:
            return None
        self._read_at = now
        try:
            found = self.client.hgetall(self.key)
        except redis.RedisError as exc:
            log.debug("%s: Redis unreachable (%s), using this process's values", self.what, exc)
            return None
        return {_text(field): _text(value) for field, value in found.items()}

    def put(self, field: str, value: str) -> None:
        """Set one field and keep the hash for another TTL_S."""
        try:
            with self.client.pipeline(transaction=False) as pipe:
                pipe.hset(self.key, field, value)
                pipe.expire(self.key, TTL_S)
                pipe.execute()
        except redis.RedisError as exc:
            log.debug("%s: cannot share %s (%s)", self.what, field, exc)


def _text(raw: bytes | str) -> str:
    return raw.decode() if isinstance(raw, bytes) else str(raw)
