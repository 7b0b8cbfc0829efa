"""A real worker runs its tasks on workers.pool's threads pool (swapped in at worker_init)."""

from __future__ import annotations

import pytest
from stack import Stack, Worker, stack_fixture

from swarm.client.core import SwarmClient

pytestmark = pytest.mark.integration

stack = stack_fixture(["--latency-ms", "0"], Worker("w1", c=4))


def test_the_worker_runs_the_pool_that_hands_back_what_escapes_a_task(stack: Stack) -> None:
    with SwarmClient(stack.settings()) as swarm:
        stats = swarm.app.control.inspect(timeout=10).stats() or {}
    [worker] = stats.values()
    assert worker["pool"]["implementation"] == "workers.pool:TaskPool"
    assert worker["pool"]["max-concurrency"] == 4
