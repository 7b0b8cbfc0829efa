"""Which gateway the workers call, published in Redis so a producer can compare its own.

A producer's SWARM_BASE_URL serves only its start-up check; the workers call theirs. Each
worker process publishes its base URL (never its key) with the time it last did so, every
minute while it runs; a producer that finds workers whose gateways all differ from its own
says so before it submits.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time

import redis

log = logging.getLogger(__name__)

KEY = "swarm:worker-gateways"
"""Hash: ``<gateway URL>`` -> time (Unix s) a worker last published it."""
KEY_TTL_S = 86400
"""The hash goes when no worker has published for a day."""
REFRESH_S = 60.0
FRESH_S = 3 * REFRESH_S
"""Gateways published less than this long ago count as the running workers'."""


def publish(client: redis.Redis, base_url: str, now: float | None = None) -> None:
    """Say that a worker calls ``base_url`` (a URL, never a key)."""
    pipe = client.pipeline(transaction=False)
    pipe.hset(KEY, base_url, f"{now if now is not None else time.time():.3f}")
    pipe.expire(KEY, KEY_TTL_S)
    pipe.execute()


def worker_gateways(client: redis.Redis, now: float | None = None) -> set[str]:
    """Gateways the running workers published recently."""
    now = now if now is not None else time.time()
    found = set()
    for url, at in client.hgetall(KEY).items():
        url = url.decode() if isinstance(url, bytes) else url
        if now - float(at) <= FRESH_S:
            found.add(url)
    return found


def mismatch(own: str, workers: set[str]) -> str | None:
    """One line when workers are known and none calls ``own``, else None."""
    if not workers or _same(own, workers):
        return None
    theirs = ", ".join(sorted(workers))
    return (
        f"the workers call {theirs}, not this producer's SWARM_BASE_URL {own} (the "
        "workers' own SWARM_BASE_URL and key decide where calls go; the same gateway under "
        "another name, such as a compose service seen from the host, is fine)"
    )


def _same(own: str, workers: set[str]) -> bool:
    return own.rstrip("/") in {url.rstrip("/") for url in workers}


def keep_publishing(client: redis.Redis, base_url: str) -> threading.Thread:
    """Publish now and then every REFRESH_S from a daemon thread (a worker process)."""
    publish(client, base_url)

    def loop() -> None:
        while True:
            time.sleep(REFRESH_S)
            try:
                publish(client, base_url)
            except redis.RedisError:
                log.debug("gateway publish failed (retried in %.0f s)", REFRESH_S)

    name = f"swarm-gateway-publish-{socket.gethostname()}-{os.getpid()}"
    thread = threading.Thread(target=loop, name=name, daemon=True)
    thread.start()
    return thread
