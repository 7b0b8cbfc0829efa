"""Connection pools in shards: the HTTP transport of a process's openai client.

A worker sends its calls from many threads at once (a message's node threads), through
one openai client. httpcore's pool serves every request under one lock and, on each
request and each response closed, walks all of its connections (closed? expired? idle?,
a socket poll for each idle one): with a hundred threads that is a hundred connections
walked twice per call, under a lock the threads contend for. Here each thread is given one
of ``shards`` pools (round robin, at its first request) and keeps it: a pool serves a few
threads and walks a few connections, and its threads still reuse each other's warm
connections (a pool per thread opened a cold connection for every thread's first call,
which bunched arrivals at a rate-limited gateway). httpx offers no such transport; this
one only picks which of its own ``httpx2.HTTPTransport`` pools serves a request.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable

import httpx2

SHARDS = 32
"""Pools of a client (each of ``SWARM_HTTP_POOL_SIZE`` / SHARDS connections: 8 by default).

httpcore polls every idle connection of a pool (is the socket readable?) each time a
request starts or a response is closed, and each poll hands the GIL to another runnable
thread: more, smaller pools mean fewer polls and fewer context switches at a hundred node
threads (the figures: ops/bench/results/hosted_speed_cpu.md)."""


class ThreadPools(httpx2.BaseTransport):
    """Sends each request through its thread's pool (see the module docstring)."""

    def __init__(self, make: Callable[[int], httpx2.BaseTransport], shards: int, size: int) -> None:
        self._make = make
        """Makes a pool of that many connections."""
        self._size = max(size // shards, 1)
        self._pools: list[httpx2.BaseTransport | None] = [None] * shards
        self._turn = itertools.count()
        self._local = threading.local()
        self._lock = threading.Lock()

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        pool = getattr(self._local, "pool", None)
        if pool is None:
            pool = self._local.pool = self._pool(next(self._turn) % len(self._pools))
        return pool.handle_request(request)

    def _pool(self, index: int) -> httpx2.BaseTransport:
        """Pool ``index``, made on first use."""
        with self._lock:
            pool = self._pools[index]
            if pool is None:
                pool = self._pools[index] = self._make(self._size)
            return pool

    def close(self) -> None:
        with self._lock:
            pools, self._pools = self._pools, [None] * len(self._pools)
        for pool in pools:
            if pool is not None:
                pool.close()

    def pools(self) -> int:
        """Pools made so far (for tests)."""
        with self._lock:
            return sum(pool is not None for pool in self._pools)
