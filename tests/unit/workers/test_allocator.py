"""The worker's allocator: at most SWARM_MALLOC_ARENAS arenas; a trim at most once per
period (and after each aggregation), none when disabled."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

from swarm.jobs.queueing import AGGREGATE_TASK, SUBAGENTS_TASK
from workers import process, signals
from workers.allocator import M_ARENA_MAX, Trimmer, limit_arenas, trim_due

HEAPS = """
import ctypes, sys, threading
if sys.argv[1] == "worker":
    import workers.celery  # the worker's entry point
libc = ctypes.CDLL("libc.so.6")
libc.fopen.restype = ctypes.c_void_p
libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
held, start, end = [], threading.Barrier(12), threading.Barrier(12)
def hold():
    start.wait()
    held.append([bytes(200_000) for _ in range(5)])
    end.wait()
threads = [threading.Thread(target=hold) for _ in range(12)]
for t in threads: t.start()
for t in threads: t.join()
fp = libc.fopen(sys.argv[2].encode(), b"w")
libc.malloc_info(0, ctypes.c_void_p(fp))
libc.fclose(ctypes.c_void_p(fp))
print(open(sys.argv[2]).read().count("<heap nr="))
"""
"""Twelve threads each hold 1 MB at once; prints the arenas (malloc_info's heaps)."""


def _arenas(mode: str, tmp: str, **env: str) -> int:
    environ = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"} | env
    done = subprocess.run([sys.executable, "-c", HEAPS, mode, f"{tmp}/heaps.xml"], env=environ,
                          capture_output=True, text=True, check=True)  # fmt: skip
    return int(done.stdout.split()[-1])


@pytest.mark.glibc  # malloc_info
def test_a_worker_process_keeps_its_threads_in_two_malloc_arenas(tmp_path: Any) -> None:
    assert _arenas("plain", str(tmp_path)) > 2  # glibc alone: an arena per busy thread
    assert _arenas("worker", str(tmp_path)) <= 2
    assert _arenas("worker", str(tmp_path), SWARM_MALLOC_ARENAS="0") > 2
    assert _arenas("worker", str(tmp_path), MALLOC_ARENA_MAX="4") == 4  # the variable wins


def test_arenas_are_capped_unless_disabled_or_set_by_the_environment() -> None:
    calls: list[tuple[int, int]] = []

    def mallopt(param: int, value: int) -> int:
        calls.append((param, value))
        return 1

    assert limit_arenas(2, {}, mallopt)
    assert not limit_arenas(0, {}, mallopt)
    assert not limit_arenas(2, {"MALLOC_ARENA_MAX": "8"}, mallopt)
    assert not limit_arenas(2, {}, lambda _p, _v: 0)  # mallopt refused
    assert calls == [(M_ARENA_MAX, 2)]


def test_a_trim_is_due_once_per_period_and_never_when_disabled() -> None:
    assert trim_due(None, 0.0, 30.0)
    assert not trim_due(10.0, 39.0, 30.0)
    assert trim_due(10.0, 40.0, 30.0)
    assert not trim_due(None, 100.0, 0.0)


def test_the_trimmer_calls_malloc_trim_at_most_every_period() -> None:
    now = [0.0]
    calls: list[int] = []
    trimmer = Trimmer(30.0, trim=calls.append, clock=lambda: now[0])
    results = []
    for at in (0.0, 1.0, 29.0, 30.0, 45.0, 61.0):
        now[0] = at
        results.append(trimmer.maybe_trim())
    assert results == [True, False, False, True, False, True]
    assert calls == [0, 0, 0]


def test_the_worker_trims_the_real_allocator() -> None:
    assert Trimmer(1.0).maybe_trim()  # glibc here: malloc_trim exists and runs


def test_an_aggregation_trims_even_when_no_trim_is_due() -> None:
    now = [0.0]
    calls: list[int] = []
    trimmer = Trimmer(30.0, trim=calls.append, clock=lambda: now[0])
    assert trimmer.maybe_trim()
    now[0] = 5.0
    assert not trimmer.maybe_trim()
    assert trimmer.maybe_trim(now_anyway=True)
    assert not Trimmer(0.0, trim=calls.append).maybe_trim(now_anyway=True)  # disabled
    assert calls == [0, 0]


class _Task:
    def __init__(self, name: str) -> None:
        self.name = name


def test_the_worker_trims_after_its_aggregation_task(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[bool] = []

    class Recorder:
        def maybe_trim(self, *, now_anyway: bool = False) -> bool:
            asked.append(now_anyway)
            return True

    settings = type("S", (), {"malloc_trim_s": 30.0})()
    monkeypatch.setattr(process, "current", lambda: type("R", (), {"settings": settings})())
    monkeypatch.setattr(process, "trimmer", lambda _every_s: Recorder())
    signals._trim_allocator(task=_Task(SUBAGENTS_TASK))
    signals._trim_allocator(task=_Task(AGGREGATE_TASK))
    assert asked == [False, True]
