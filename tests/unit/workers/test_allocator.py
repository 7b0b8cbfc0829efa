"""The allocator trimmer: at most one trim per period, none when disabled."""

from __future__ import annotations

from workers.allocator import Trimmer, trim_due


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
