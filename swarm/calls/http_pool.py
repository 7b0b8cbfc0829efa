"""Connection pools per thread: the HTTP transport of a process's openai client.

A worker sends its calls from many threads at once (a message's node threads), through
one openai client. httpcore's pool serves every request under one lock and, on each
request and each response closed, walks all of its connections (closed? expired? idle?,
a socket poll for each idle one): with a hundred threads that is a hundred connections
walked twice per call, under a lock the threads contend for. Given its own small pool,
a thread walks one or two. On a 0 ms gateway this took a worker's CPU per call from
4.21 to 3.43 ms (ops/bench/results/hosted_speed.md). httpx offers no such transport;
this one only picks which of its own ``httpx2.HTTPTransport`` pools serves a request.

Bounded: at most ``max_pools`` threads get a pool of their own, each of
``per_thread`` connections; later threads share one pool of ``shared`` connections, and
the pool of a thread that ended is closed when the next thread asks for one.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable

import httpx2

log = logging.getLogger(__name__)

PER_THREAD = 2
"""Connections of one thread's pool (a thread sends one request at a time; one spare)."""


class ThreadPools(httpx2.BaseTransport):
    """Sends each request through its thread's own pool (see the module docstring)."""

    def __init__(
        self, make: Callable[[int], httpx2.BaseTransport], max_pools: int, shared: int
    ) -> None:
        self._make = make
        """Makes a pool of that many connections."""
        self._max_pools = max_pools
        self._local = threading.local()
        self._lock = threading.Lock()
        self._pools: list[tuple[weakref.ref[threading.Thread], httpx2.BaseTransport]] = []
        self._shared_size = shared
        self._shared: httpx2.BaseTransport | None = None

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        pool = getattr(self._local, "pool", None)
        if pool is None:
            pool = self._local.pool = self._pool_for(threading.current_thread())
        return pool.handle_request(request)

    def _pool_for(self, thread: threading.Thread) -> httpx2.BaseTransport:
        """This thread's new pool, or the shared one when ``max_pools`` threads have one."""
        with self._lock:
            self._close_ended()
            if len(self._pools) < self._max_pools:
                pool = self._make(PER_THREAD)
                self._pools.append((weakref.ref(thread), pool))
                return pool
            if self._shared is None:
                log.debug("http: %d threads have their own pool; the others share one",
                          self._max_pools)  # fmt: skip
                self._shared = self._make(self._shared_size)
            return self._shared

    def _close_ended(self) -> None:
        """Close the pools of threads that ended (under the lock)."""
        alive = []
        for ref, pool in self._pools:
            thread = ref()
            if thread is not None and thread.is_alive():
                alive.append((ref, pool))
            else:
                pool.close()
        self._pools = alive

    def close(self) -> None:
        with self._lock:
            pools = [pool for _, pool in self._pools]
            if self._shared is not None:
                pools.append(self._shared)
            self._pools, self._shared = [], None
        for pool in pools:
            pool.close()

    def pools(self) -> int:
        """Threads with a pool of their own now (for tests and metrics)."""
        with self._lock:
            return len(self._pools)
