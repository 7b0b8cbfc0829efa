"""How many node threads (calls in flight) a worker process runs."""

from __future__ import annotations

import pytest

from workers.process import node_threads


@pytest.mark.parametrize(
    ("configured", "task_threads", "threads"),
    [(None, 5, 64), (None, 32, 64), (None, 50, 100), (None, 1, 64), (8, 50, 8), (300, 5, 300)],
)
def test_calls_in_flight_do_not_shrink_with_the_task_threads(
    configured: int | None, task_threads: int, threads: int
) -> None:
    assert node_threads(configured, task_threads) == threads
