"""A worker's sweeper sweeps when a task its process deferred falls due (workers.deferral),
not only every ``sweep_every_s``: a countdown of 1 s is not a countdown of 3."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace
from typing import Any

from workers.leases import Sweeper


def sweeper() -> Sweeper:
    rt: Any = SimpleNamespace(settings=SimpleNamespace(lease_s=1000.0))
    return Sweeper(app=None, rt=rt)


def wait_in_thread(target: Sweeper, until_s: float) -> tuple[threading.Thread, list[bool]]:
    woke: list[bool] = []
    thread = threading.Thread(target=lambda: woke.append(target._wait(time.monotonic() + until_s)))
    thread.start()
    return thread, woke


def test_a_deferral_wakes_the_sweeper_at_its_due_time() -> None:
    target = sweeper()
    thread, woke = wait_in_thread(target, 600)
    target.wake_in(0.05)
    thread.join(timeout=30)  # a generous bound on the wake, not a timing assertion
    assert woke == [True]
    assert target._due == []  # the due time it woke for is spent


def test_a_stopped_sweeper_stops_waiting() -> None:
    target = sweeper()
    thread, woke = wait_in_thread(target, 600)
    target.stop()
    thread.join(timeout=30)
    assert woke == [False]
