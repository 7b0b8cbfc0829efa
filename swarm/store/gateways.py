"""Which gateway the workers call, published in Redis so a producer can compare its own.

A producer's SWARM_BASE_URL serves only its start-up check; the workers call theirs. Each
worker process registers its base URL (never its key) under its own name with the time the
registration lapses, and renews it at every beat of its heartbeat (swarm.store.heartbeat):
a worker that stops (or is killed, or cut off) drops out within one lease, and one that
shuts down cleanly withdraws at once. A producer that finds live workers whose gateways all
differ from its own says so before it submits; registrations found lapsed are removed as
they are read.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Iterable
from dataclasses import dataclass

import redis

log = logging.getLogger(__name__)

KEY = "swarm:worker-gateways"
"""Hash: ``<worker name>`` -> ``<lapses at (Unix s)> <gateway URL>``."""
KEY_TTL_S = 86400
"""The hash goes when no worker has published for a day."""


def worker_name() -> str:
    """This process's name in the registry: ``<host>:<pid>``."""
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True)
class Registration:
    """One worker process's entry: renewed every heartbeat, withdrawn at shutdown."""

    client: redis.Redis
    base_url: str
    """The gateway the worker calls (a URL, never a key)."""
    ttl_s: float
    """How long one renewal keeps the entry live (the worker's lease)."""
    name: str

    def publish(self, now: float | None = None) -> None:
        """Register (or renew) this worker's gateway for ``ttl_s`` more seconds."""
        lapses = (now if now is not None else time.time()) + self.ttl_s
        pipe = self.client.pipeline(transaction=False)
        pipe.hset(KEY, self.name, f"{lapses:.3f} {self.base_url}")
        pipe.expire(KEY, KEY_TTL_S)
        pipe.execute()

    def renew(self) -> None:
        """publish, for the heartbeat: a failed renewal is said at DEBUG (the next beat
        tries again; a worker cut off from Redis for a lease drops out, as it should)."""
        try:
            self.publish()
        except redis.RedisError as exc:
            log.debug("gateway registration not renewed: %s", exc)

    def withdraw(self) -> None:
        """Remove this worker's entry (it is shutting down)."""
        try:
            self.client.hdel(KEY, self.name)
        except redis.RedisError as exc:
            log.debug("gateway registration not withdrawn (it lapses by itself): %s", exc)


def worker_gateways(client: redis.Redis, now: float | None = None) -> set[str]:
    """Gateways of the live workers; lapsed registrations are removed."""
    now = now if now is not None else time.time()
    found, lapsed = set(), []
    for name, value in client.hgetall(KEY).items():
        live = _live_url(_text(value), now)
        if live is None:
            lapsed.append(name)
        else:
            found.add(live)
    if lapsed:
        client.hdel(KEY, *lapsed)
        log.debug("swarm: %d lapsed worker gateway registration(s) removed", len(lapsed))
    return found


def _live_url(value: str, now: float) -> str | None:
    """The URL of a registration that has not lapsed (None: lapsed, or not one of ours:
    an older worker's ``<url> -> <time>`` field)."""
    lapses, _, url = value.partition(" ")
    try:
        live = float(lapses) > now
    except ValueError:
        return None
    return url if live and url else None


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def mismatch(own: str, workers: Iterable[str]) -> str | None:
    """One line when live workers are known and none calls ``own``, else None."""
    workers = set(workers)
    if not workers or own.rstrip("/") in {url.rstrip("/") for url in workers}:
        return None
    theirs = ", ".join(sorted(workers))
    return (
        f"the running workers call {theirs}, not this producer's SWARM_BASE_URL {own} (the "
        "workers' own SWARM_BASE_URL and key decide where calls go; the same gateway under "
        "another name, such as a compose service seen from the host, is fine)"
    )
