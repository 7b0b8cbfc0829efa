"""The failover tests' progress wait (tests/integration/failover.py), on a handle whose
progress reads are given: no Redis, no workers."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

import pytest
import redis
from failover import wait_progress_after

from swarm.client import SwarmHandle

pytestmark = pytest.mark.integration


class Reads:
    """A handle whose progress() gives ``reads`` in turn (an exception is raised), then
    the last one again."""

    def __init__(self, *reads: object) -> None:
        self._reads = list(reads)

    def progress(self) -> object:
        read = self._reads.pop(0) if len(self._reads) > 1 else self._reads[0]
        if isinstance(read, Exception):
            raise read
        return read


def counts(done: int, total: int = 10) -> SimpleNamespace:
    return SimpleNamespace(nodes_done=done, nodes_total=total, ended=done)


def handle(*reads: object) -> SwarmHandle:
    return cast(SwarmHandle, Reads(*reads))


def test_a_node_ending_after_an_outage_is_progress() -> None:
    outage = redis.exceptions.ConnectionError("failover")
    wait_progress_after(handle(counts(3), outage, counts(3), counts(4)), 3, 30)


def test_a_seen_count_of_every_node_is_progress_already() -> None:
    # Read late (a loaded test process), the first count after the promotion may already
    # count every node: nothing is left to end after it, and the wait must not fail.
    wait_progress_after(handle(counts(10)), 10, 30)


def test_no_node_ending_fails_quoting_the_last_read() -> None:
    with pytest.raises(AssertionError, match=r"no progress past 4 in 0.2 s; last read: "):
        wait_progress_after(handle(counts(4)), 4, 0.2)
