"""A memory probe for Celery worker processes (diagnostics, not product code).

Put this folder on ``PYTHONPATH`` and set ``MEMPROBE_DIR``: every ``celery ... worker``
process started with it appends one JSON line every ``MEMPROBE_EVERY`` seconds (10) to
``MEMPROBE_DIR/probe-<pid>.jsonl``: VmRSS (and its RssAnon and RssFile parts), glibc's
mallinfo2 (arena, mmapped, in use, free), ``sys.getallocatedblocks()``, Celery's
``worker.state`` sizes and task counts, the intake's ``_released`` entries, the thread
count, an object census by type every third sample, and, with ``MEMPROBE_TRACE=1``,
tracemalloc's top tracebacks and their diff from the ``MEMPROBE_BASE_AT``-th sample
(tracing starts at the first sample, after the imports; ``MEMPROBE_FRAMES`` frames, 8:
slow, a 20,000-input row took 9 minutes), and, with ``MEMPROBE_LINECACHE=1``, the source
linecache holds and the call chain that made it read each of its largest files.
Other processes (the CLI, the simulator) are left alone.
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import sys
import threading
import time
import tracemalloc
from collections import Counter
from typing import Any

MALLINFO_FIELDS = ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
                   "uordblks", "fordblks", "keepcost")  # fmt: skip


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in MALLINFO_FIELDS]


def _is_worker() -> bool:
    with open("/proc/self/cmdline", "rb") as f:
        args = f.read().split(b"\0")
    return b"worker" in args and b"celery" in args


def _mallinfo() -> dict[str, int]:
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = _MallInfo2
    info = libc.mallinfo2()
    return {"arena": info.arena, "hblkhd": info.hblkhd, "uord": info.uordblks,
            "ford": info.fordblks}  # fmt: skip


def _status_mb(field: str) -> float:
    """``field`` of /proc/self/status (VmRSS, RssAnon, RssFile) in MB."""
    with open("/proc/self/status") as f:
        return int(f.read().split(f"{field}:")[1].split()[0]) / 1024


def _rss_mb() -> float:
    return _status_mb("VmRSS")


def _celery_state() -> dict[str, Any]:
    from celery.worker import state

    out: dict[str, Any] = {
        "revoked": len(state.revoked),
        "requests": len(state.requests),
        "active": len(state.active_requests),
        "reserved": len(state.reserved_requests),
        "total_count": dict(state.total_count),
    }
    intake = sys.modules.get("workers.intake")
    if intake is not None and intake._intake is not None:
        out["intake_released"] = len(intake._intake._released)
    return out


_LINECACHE_CALLERS: dict[str, list[str]] = {}
"""File name -> the call chain (module:function, innermost first) that first read it."""


def _watch_linecache() -> None:
    """Record who makes linecache read each source file (``MEMPROBE_LINECACHE=1``)."""
    import linecache

    read = linecache.updatecache

    def updatecache(filename: str, module_globals: Any = None) -> list[str]:
        if filename not in _LINECACHE_CALLERS:
            frame, chain = sys._getframe(1), []
            while frame is not None and len(chain) < 14:
                chain.append(f"{frame.f_globals.get('__name__')}:{frame.f_code.co_name}")
                frame = frame.f_back
            _LINECACHE_CALLERS[filename] = chain
        return read(filename, module_globals)

    linecache.updatecache = updatecache  # type: ignore[assignment]


def _linecache() -> dict[str, Any]:
    """How much source linecache holds, and who read the largest files."""
    import linecache

    sizes = {name: sum(map(len, entry[2])) for name, entry in list(linecache.cache.items())
             if len(entry) == 4}  # fmt: skip
    largest = sorted(sizes.items(), key=lambda item: -item[1])[:12]
    callers = [(name, size, _LINECACHE_CALLERS.get(name)) for name, size in largest]
    return {"files": len(sizes), "mb": sum(sizes.values()) / 1e6, "largest": callers}


def _sample(n: int, trace: bool, base: list[Any]) -> dict[str, Any]:
    record: dict[str, Any] = {
        "t": time.time(),
        "rss": _rss_mb(),
        "anon": _status_mb("RssAnon"),
        "file": _status_mb("RssFile"),
        "blocks": sys.getallocatedblocks(),
        "malloc": _mallinfo(),
        "celery": _celery_state(),
        "threads": threading.active_count(),
        "code": getattr(sys.modules.get("workers"), "__file__", None),
        "linecache": _linecache(),
    }
    if n % 3 == 0:
        record["types"] = Counter(type(o).__name__ for o in gc.get_objects()).most_common(25)
    if trace and tracemalloc.is_tracing():
        skip = tracemalloc.Filter(False, tracemalloc.__file__)
        snap = tracemalloc.take_snapshot().filter_traces([skip])
        record["traced_mb"] = tracemalloc.get_traced_memory()[0] / 1e6
        if not base and n >= int(os.environ.get("MEMPROBE_BASE_AT", "3")):
            base.append(snap)
        if base:
            diff = snap.compare_to(base[0], "traceback")[:25]
            record["diff"] = [(_frames(s.traceback, 3), s.size_diff, s.count_diff) for s in diff]
        top = snap.statistics("traceback")[:15]
        record["top"] = [(_frames(s.traceback, 2), s.size, s.count) for s in top]
    return record


def _frames(traceback: tracemalloc.Traceback, count: int) -> list[str]:
    """The innermost ``count`` frames as ``file:line`` (not Traceback.format(): that reads
    every file through linecache, whose cache then shows in the next snapshot)."""
    return [f"{frame.filename}:{frame.lineno}" for frame in list(traceback)[-count:]]


def _loop(path: str, every_s: float, trace: bool) -> None:
    base: list[Any] = []
    n = 0
    while True:
        time.sleep(every_s)
        n += 1
        if trace and n == 1:
            tracemalloc.start(int(os.environ.get("MEMPROBE_FRAMES", "8")))
        with open(path, "a") as f:
            f.write(json.dumps(_sample(n, trace, base)) + "\n")


if os.environ.get("MEMPROBE_DIR") and _is_worker():
    if os.environ.get("MEMPROBE_LINECACHE") == "1":
        _watch_linecache()
    _path = os.path.join(os.environ["MEMPROBE_DIR"], f"probe-{os.getpid()}.jsonl")
    _args = (_path, float(os.environ.get("MEMPROBE_EVERY", "10")),
             os.environ.get("MEMPROBE_TRACE") == "1")  # fmt: skip
    threading.Thread(target=_loop, args=_args, daemon=True, name="memprobe").start()
