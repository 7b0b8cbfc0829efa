"""A call's claim outlives every request sent under it (swarm.calls.session): a run whose
process froze (or starved, or lost Redis) with a request in flight keeps the slot until
that request has ended, so the run that takes over never calls at the same time.

Time jumps instead of passing: ``time.monotonic`` (the memory store's lease clock and the
session's) runs ``Clock.offset`` ahead of the real one."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from doubles import MockGateway, completion, job_spec

from swarm.calls.runtime import Runtime
from swarm.catalog import load_catalog
from swarm.jobs.subagent import run_node
from swarm.records import NodeEnvelope
from swarm.settings import Settings
from swarm.store import MemoryJobStore
from swarm.store.heartbeat import LeaseKeeper
from swarm.store.leases import claim_lease

LEASE_S = 2.0
NODE_TIMEOUT_S = 5.0
WAIT_S = 10.0
"""Bound on waits for events that come (never a timing assertion)."""


class Clock:
    """``time.monotonic`` moved ahead by ``offset`` seconds."""

    def __init__(self) -> None:
        self.offset = 0.0
        self._real = time.monotonic

    def __call__(self) -> float:
        return self._real() + self.offset


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    jump = Clock()
    monkeypatch.setattr(time, "monotonic", jump)
    return jump


class FrozenKeeper(LeaseKeeper):
    """The heartbeat of a process that froze (or starved) right after its request went out:
    it never renews anything."""

    def _start(self) -> None:
        pass


class Tries(MemoryJobStore):
    """Counts each run's tries to claim a slot."""

    def __init__(self) -> None:
        super().__init__()
        self.tries: dict[str, int] = {}

    def claim_or_answer(
        self,
        job_id: str,
        slot: str,
        owner: str,
        ttl_s: float,
        key: Any = None,
        companion: Any = None,
    ) -> Any:
        self.tries[owner] = self.tries.get(owner, 0) + 1
        return super().claim_or_answer(job_id, slot, owner, ttl_s, key, companion)


class Gateway(MockGateway):
    """Holds the first request until ``release``; counts requests for one slot served at
    the same time (every request here is the one node's)."""

    def __init__(self) -> None:
        super().__init__(self.answer)
        self.first_in = threading.Event()
        self.release = threading.Event()
        self.overlaps = 0
        self._serving = 0
        self._lock = threading.Lock()

    def answer(self, body: dict[str, Any], n: int) -> httpx2.Response:
        with self._lock:
            self._serving += 1
            self.overlaps += self._serving > 1
        try:
            if n == 1:
                self.first_in.set()
                self.release.wait(WAIT_S)
            return completion(f"answer {n}")
        finally:
            with self._lock:
                self._serving -= 1


def wait_for(check: Any, what: str) -> None:
    deadline = time.perf_counter() + WAIT_S
    while not check():
        assert time.perf_counter() < deadline, what
        time.sleep(0.01)


@pytest.fixture
def parts() -> Iterator[tuple[Tries, Gateway, Settings]]:
    store, gw = Tries(), Gateway()
    store.create_job(job_spec(1), ["input 0"])
    yield store, gw, Settings(max_attempts=1, node_timeout_s=NODE_TIMEOUT_S)
    gw.release.set()


def runner(store: Tries, gw: Gateway, settings: Settings) -> tuple[threading.Thread, list[Any]]:
    """A run of node n00 in a process of its own (its own heartbeat, frozen), in a thread."""
    keeper = FrozenKeeper(store, LEASE_S)
    rt = Runtime(settings, load_catalog(), store, gw.client(), leases=keeper)
    ended: list[NodeEnvelope] = []
    thread = threading.Thread(target=lambda: ended.append(run_node(rt, "j1", "n00")))
    thread.start()
    return thread, ended


def test_a_frozen_runs_request_in_flight_keeps_the_slot_until_it_ends(
    clock: Clock, parts: tuple[Tries, Gateway, Settings]
) -> None:
    store, gw, settings = parts
    first, first_ended = runner(store, gw, settings)
    assert gw.first_in.wait(WAIT_S)  # its request is in service; its process freezes
    clock.offset += LEASE_S + 0.5  # more than a lease passes with no renewal
    (holder,) = store.tries
    second, second_ended = runner(store, gw, settings)  # the run that takes over
    wait_for(lambda: sum(store.tries.values()) >= 3 or len(gw.requests) > 1,
             "the second run waiting, or calling")  # fmt: skip
    gw.release.set()  # the first request ends (answered)
    first.join(WAIT_S)
    second.join(WAIT_S)
    assert gw.overlaps == 0
    assert len(gw.requests) == 1  # the second run reused the first one's answer
    assert [e.ok for e in first_ended + second_ended] == [True, True]
    assert second_ended[0].content == "answer 1"
    assert store.tries[holder] == 1


def test_a_frozen_run_blocks_the_slot_for_a_lease_and_a_node_timeout_at_most(
    clock: Clock, parts: tuple[Tries, Gateway, Settings]
) -> None:
    store, gw, settings = parts
    first, _ = runner(store, gw, settings)
    assert gw.first_in.wait(WAIT_S)
    clock.offset += LEASE_S + NODE_TIMEOUT_S + 0.1  # its request has timed out by now
    assert store.claim("j1", "n00", "the run that takes over", LEASE_S)
    gw.release.set()
    first.join(WAIT_S)


def test_a_renewal_never_shortens_a_claim(clock: Clock) -> None:
    store = MemoryJobStore()
    store.create_job(job_spec(1), ["input 0"])
    assert store.claim("j1", "n00", "me", LEASE_S + NODE_TIMEOUT_S)
    assert store.renew_leases([claim_lease("j1", "n00", "me")], LEASE_S) == set()
    clock.offset += LEASE_S + 0.5  # past the renewal's lifetime, within the claim's
    assert not store.claim("j1", "n00", "another run", LEASE_S)
