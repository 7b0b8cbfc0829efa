"""The node threads shared between jobs: a job over its share gives threads to another's."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future

import pytest

from swarm.calls import thread_share
from swarm.calls.admission import AdmissionPolicy, Ask, MemoryAdmission, Outcome
from swarm.calls.admission.gate import Gate
from swarm.catalog import load_catalog
from swarm.errors import RetryLater
from workers.node_pool import NodePool, gives_way


@pytest.mark.parametrize(
    ("job", "running", "queued", "promised", "gives"),
    [
        ("a", {"a": 8}, {"b": 2}, 0, True),  # a holds every thread, b's nodes wait
        ("a", {"a": 8}, {"b": 2}, 2, False),  # two threads already promised to b's two
        ("a", {"a": 8}, {"a": 5}, 0, False),  # only a's own nodes wait
        ("a", {"a": 4, "b": 4}, {"b": 1}, 0, False),  # a within its share (8 / 2)
        ("a", {"a": 5, "b": 3}, {"b": 1}, 0, True),
        ("a", {"a": 3, "b": 3, "c": 2}, {"c": 1}, 0, True),  # share 8 / 3
        ("a", {"a": 2, "b": 3, "c": 3}, {"c": 1}, 0, False),
        (None, {None: 8}, {"b": 2}, 0, False),  # a node of no known job keeps its thread
        ("a", {"a": 7, None: 1}, {None: 1}, 0, True),
    ],
)
def test_a_job_over_its_share_gives_way_to_another_jobs_waiting_nodes(
    job: str | None,
    running: dict[str | None, int],
    queued: dict[str | None, int],
    promised: int,
    gives: bool,
) -> None:
    assert gives_way(job, running, queued, promised, threads=8) is gives


def waiting_nodes(
    pool: NodePool, job: str, count: int
) -> tuple[list[Future[str]], threading.Event]:
    """``count`` nodes of ``job`` that wait (as for admission) until they give their thread
    away or ``stop`` is set; returns once all run."""
    started, stop = threading.Semaphore(0), threading.Event()

    def node() -> str:
        started.release()
        while not stop.wait(0.001):
            if thread_share.gives_way():
                return "gave"
        return "kept"

    with pool.for_job(job):
        futures = [pool.submit(node) for _ in range(count)]
    for _ in range(count):
        assert started.acquire(timeout=30)
    return futures, stop


def small_job_runs(pool: NodePool) -> list[str]:
    """A small job's two nodes, which run only together (each waits for the other): what
    they returned once both had a thread."""
    together = threading.Barrier(2, timeout=30)

    def small_node() -> str:
        together.wait()
        return "small ran"

    with pool.for_job("small"):
        small = [pool.submit(small_node) for _ in range(2)]
    return [f.result(timeout=30) for f in small]


@pytest.fixture
def pool() -> Iterator[NodePool]:
    pool = NodePool(4)
    thread_share.install(pool.gives_way)
    yield pool
    thread_share.install(None)
    pool.shutdown(wait=True)


def test_a_full_pool_gives_exactly_the_threads_another_jobs_nodes_wait_for(pool: NodePool) -> None:
    big, stop = waiting_nodes(pool, "big", 4)
    assert small_job_runs(pool) == ["small ran", "small ran"]
    stop.set()
    assert sorted(f.result(timeout=30) for f in big) == ["gave", "gave", "kept", "kept"]
    assert pool.counts() == ({}, {}, 0)


def test_nodes_of_one_job_never_give_way_to_each_other(pool: NodePool) -> None:
    first, stop = waiting_nodes(pool, "job", 4)
    with pool.for_job("job"):
        queued = pool.submit(lambda: "ran")
    running, waiting, promised = pool.counts()
    assert (running, waiting, promised) == ({"job": 4}, {"job": 1}, 0)
    assert not pool.gives_way()  # not a node thread: never
    stop.set()
    assert queued.result(timeout=30) == "ran"
    assert [f.result(timeout=30) for f in first] == ["kept"] * 4


def test_without_a_pool_nothing_gives_way() -> None:
    thread_share.install(None)
    assert thread_share.gives_way() is False


def test_calls_waiting_for_a_full_model_give_their_threads_to_another_jobs_nodes(
    pool: NodePool,
) -> None:
    """The gate and the pool together: a large job's calls fill the pool, all waiting for
    the model's one permit (held elsewhere); a small job's two nodes then get two threads,
    and exactly two of the large job's calls go back to the queue for them."""
    model = load_catalog().model("kimi-k2.5").model_copy(update={"max_inflight": 1})
    ctl = MemoryAdmission(AdmissionPolicy(poll_s=0.001, max_poll_s=0.01))
    held = ctl.acquire(model, Ask("elsewhere", 10)).permit
    assert held is not None
    waiting = threading.Semaphore(0)

    def call(job: str) -> Callable[[float], None]:
        def sleep(seconds: float) -> None:
            waiting.release()
            time.sleep(min(seconds, 0.01))

        def node() -> str:
            gate = Gate(ctl, model, job, 10, max_wait_s=2.0, max_countdown_s=60.0,
                        may_requeue=True, sleep=sleep)  # fmt: skip
            try:
                permit = gate.acquire()
            except RetryLater as later:
                return later.reason
            ctl.finish(model, permit, Outcome(used_tokens=0, sent=False))
            return "admitted"

        return node

    with pool.for_job("big"):
        big = [pool.submit(call("big")) for _ in range(4)]
    for _ in range(4):  # every thread holds a waiting call
        assert waiting.acquire(timeout=30)
    assert small_job_runs(pool) == ["small ran", "small ran"]
    gave = [f for f in big if f.done()]
    assert [f.result() for f in gave] == ["thread_wanted", "thread_wanted"]
    ctl.finish(model, held, Outcome(used_tokens=0, sent=False))  # the model frees up
    assert sorted(f.result(timeout=30) for f in big) == ["admitted"] * 2 + ["thread_wanted"] * 2


def test_ended_jobs_leave_the_pools_counts() -> None:
    # a long-lived worker runs many jobs: their counts go when their nodes end, so what
    # gives_way reads stays the jobs in the pool now
    with NodePool(2) as pool:
        for n in range(50):
            with pool.for_job(f"job-{n}"):
                pool.submit(lambda: None).result(timeout=10)
        assert (len(pool._running), len(pool._queued)) == (0, 0)
