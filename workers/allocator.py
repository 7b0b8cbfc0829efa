"""The worker's C allocator: at most SWARM_MALLOC_ARENAS malloc arenas, and the memory
it freed given back to the system at most every SWARM_MALLOC_TRIM_S, after a task ends.

A worker's Python objects stay flat while a job runs, yet its RSS grows with the nodes
it ran: glibc's malloc keeps what the worker's threads freed in their arenas (``fordblks``
of mallinfo2 grows while the memory in use stays flat), and only returns a heap's free top,
never the free pages inside it. ``malloc_trim(0)`` releases those pages. Elsewhere than
glibc (musl, macOS) there is nothing to call and nothing is done.

glibc gives threads up to 8 arenas per core, and each keeps the high-water mark of what
its threads once held; a worker's threads (task threads, node threads, the reduce tree's
calls) spread a large job's transients (the aggregation's pages and prompts) over
many of them. ``limit_arenas`` caps their number as the worker starts, before its threads
do (glibc's ``mallopt(M_ARENA_MAX)``, what ``MALLOC_ARENA_MAX`` sets; the variable, when
set, wins). The figures at 100,000 inputs: ops/bench/results/scale.md, "Worker memory at
100,000 inputs".

glibc's per-thread caches (tcache: up to 7 freed chunks of each of 64 sizes per thread)
are out of a running process's reach: no ``mallopt`` sets them and ``malloc_trim`` does not
return them. Whoever starts a worker turns them off with ``GLIBC_TUNABLES``
(swarm.procs.tunables: docker-compose.yml, ``swarm stack``, the scale bench); nothing here
does.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

log = logging.getLogger(__name__)
M_ARENA_MAX = -8
"""glibc's mallopt parameter for the most arenas (malloc.h)."""
ARENA_ENV = "MALLOC_ARENA_MAX"
"""The environment variable glibc reads for the same cap (it wins over the setting)."""


def trim_due(last: float | None, now: float, every_s: float) -> bool:
    """True when a trim is due: enabled (``every_s`` > 0) and none in the last ``every_s``."""
    return every_s > 0 and (last is None or now - last >= every_s)


def _libc(function_name: str) -> Callable[..., Any] | None:
    """The C library's ``function_name`` (glibc's ``malloc_trim``, ``mallopt``), or None
    where the C library has none."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    function = getattr(ctypes.CDLL(name), function_name, None)
    return function if callable(function) else None


def limit_arenas(
    arenas: int,
    environ: Mapping[str, str],
    mallopt: Callable[[int, int], Any] | None = None,
) -> bool:
    """Cap the process's malloc arenas at ``arenas`` (call before threads start); True
    when the cap was set. Nothing is done for 0, when ``MALLOC_ARENA_MAX`` is set (glibc
    applied it) or where there is no glibc."""
    if arenas <= 0 or environ.get(ARENA_ENV):
        return False
    function = mallopt if mallopt is not None else _libc("mallopt")
    if function is None or not function(M_ARENA_MAX, arenas):
        return False
    log.debug("swarm: malloc arenas capped at %d", arenas)
    return True


class Trimmer:
    """Calls ``trim`` (default: glibc's ``malloc_trim(0)``) when one is due; thread-safe,
    one trim at a time."""

    def __init__(
        self,
        every_s: float,
        trim: Callable[[int], Any] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.every_s = every_s
        self._trim = trim if trim is not None else _libc("malloc_trim")
        self._clock = clock
        self._last: float | None = None
        self._lock = threading.Lock()

    def maybe_trim(self, *, now_anyway: bool = False) -> bool:
        """Trim when due, or whenever trims are enabled if ``now_anyway`` (a job's
        aggregation just ended: its pages and prompts were the process's largest
        transient); True when it trimmed."""
        if self._trim is None:
            return False
        now = self._clock()
        with self._lock:
            due = trim_due(self._last, now, self.every_s)
            if not (due or (now_anyway and self.every_s > 0)):
                return False
            self._last = now
        self._trim(0)
        log.debug("swarm: malloc_trim (due every %.0f s%s)", self.every_s,
                  "" if due else "; a job's aggregation ended")  # fmt: skip
        return True
