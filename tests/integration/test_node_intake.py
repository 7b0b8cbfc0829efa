"""A worker takes another message only while its node threads can run the nodes it holds
(workers/intake.py), so the rest of a job stays in the broker's queue for any idle worker
instead of waiting in one worker's prefetch: on the Redis broker (the fetch is refused) and
on RabbitMQ (the prefetch count follows the node count, workers/prefetch.py).

Real `celery -A workers worker` processes (4 task threads, 8 node threads each), the
simulator, and jobs of 8-node messages. What a worker holds is read from its log (messages
received and not yet finished) and the job store (nodes whose envelope is stored are done).
A worker holds at most NODE_THREADS - 1 + NODES_PER_TASK nodes: it takes a message while
its nodes cost less than its node threads, and that message may bring a whole batch.
"""

from __future__ import annotations

import threading
from pathlib import Path

import procs
import pytest
import rabbit
from faults import BrokerStack, FaultStack, fault_stack, nodes_of, task_lines, wait_until

from swarm.records import InputItem

pytestmark = pytest.mark.integration

TASK_THREADS = 4
NODE_THREADS = 8
NODES_PER_TASK = 8
MOST_HELD = NODE_THREADS - 1 + NODES_PER_TASK
"""Nodes a worker may hold: below its node threads, then one more message."""
SIM_ARGS = ["--latency-ms", "2000", "--seed", "15"]
AGGREGATE = "Merge. [[sim:latency_ms=10]]"
WORKER_ENV = {"SWARM_NODE_THREADS": str(NODE_THREADS), "SWARM_NODES_PER_TASK": "8"}
BROKER_STACK = BrokerStack("intake", tuple(SIM_ARGS), WORKER_ENV)
"""The stack of ``broker_fs`` (tests/integration/conftest.py), on each broker."""


def held(worker: procs.Proc, job_id: str, node_ids: list[str], done: set[str]) -> int:
    """Nodes of the job the worker holds: in messages it received and has not finished,
    without those ``done``."""
    log = worker.log_text()
    open_ids = task_lines(log, job_id, "received") - task_lines(log, job_id, "succeeded")
    return len(nodes_of(open_ids, job_id, node_ids) - done) if open_ids else 0


def ran(worker: procs.Proc, job_id: str, node_ids: list[str]) -> int:
    """Nodes of the job in messages the worker finished."""
    return len(nodes_of(task_lines(worker.log_text(), job_id, "succeeded"), job_id, node_ids))


class Sampler:
    """Polls what each worker holds while a job runs; the largest count per worker, and
    the samples where one worker held nothing while another held more than its node
    threads can run (a backlog the idle worker could have taken)."""

    def __init__(self, broker_fs: FaultStack, workers: list[procs.Proc], job_id: str) -> None:
        self.store, self.workers, self.job_id = broker_fs.client().store, workers, job_id
        self.most = [0] * len(workers)
        self.dry_while_backlog = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sampler:
        self.node_ids = list(self.store.spec(self.job_id).node_ids)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            done = {env.node_id for env in self.store.envelopes(self.job_id)}  # stored: ended
            counts = [held(w, self.job_id, self.node_ids, done) for w in self.workers]
            self.samples += 1
            self.most = [max(a, b) for a, b in zip(self.most, counts, strict=True)]
            if min(counts) == 0 and max(counts) > NODE_THREADS:
                self.dry_while_backlog += 1


def items(n: int, latency_ms: int | None = None) -> list[InputItem]:
    """``n`` inputs; with ``latency_ms`` each answered in about that long (varied by input)."""
    if latency_ms is None:
        return [InputItem(ref=f"d{i}", text=f"diff {i}") for i in range(n)]
    return [
        InputItem(
            ref=f"d{i}",
            text=f"diff {i} [[sim:latency_ms={latency_ms // 2 + (i * 373) % latency_ms}]]",
        )
        for i in range(n)
    ]


def test_a_worker_holds_no_more_nodes_than_its_node_threads(broker_fs: FaultStack) -> None:
    # 32 nodes in 4 messages of 8, one worker with 4 task threads and 8 node threads:
    # Celery's prefetch (4 messages) would take all 32 nodes at once; the node count lets
    # it hold one message while its 8 calls run, and 3 stay queued for other workers.
    broker_fs.stop_others(["solo"])
    (worker,) = broker_fs.ensure_workers(["solo"], TASK_THREADS)
    broker_fs.stack.reset_stats()
    handle = broker_fs.client().submit(items(32), "Review", aggregate_instruction=AGGREGATE)
    wait_until(lambda: int(broker_fs.stack.stats()["inflight"]) >= NODE_THREADS, 60, "8 calls")
    inflight = int(broker_fs.stack.stats()["inflight"])
    received = task_lines(worker.log_text(), handle.id, "received")
    assert (inflight, len(received)) == (NODE_THREADS, 1)

    report = handle.wait(timeout=120).to_dict()
    assert report["status"] == "succeeded"
    assert sum(1 for node in report["nodes"] if node["status"] == "ok") == 32
    assert broker_fs.stack.stats()["max_inflight_seen"] <= NODE_THREADS + 1  # + the aggregation


def test_two_workers_share_a_job_of_multi_node_messages(broker_fs: FaultStack) -> None:
    # 96 nodes in 12 messages of 8 on two workers, calls of 0.5-1.5 s: Celery's prefetch
    # would give each worker 4 messages (32 nodes for 8 node threads) and leave one idle
    # while the other still queues nodes; the node count keeps each at MOST_HELD or less.
    workers = broker_fs.ensure_workers(["a", "b"], TASK_THREADS)
    broker_fs.stop_others(["a", "b"])
    handle = broker_fs.client().submit(items(96, 1000), "Review", aggregate_instruction=AGGREGATE)
    with Sampler(broker_fs, workers, handle.id) as sampler:
        report = handle.wait(timeout=180).to_dict()
    assert report["status"] == "succeeded"
    shares = [ran(w, handle.id, sampler.node_ids) for w in workers]
    scheme = broker_fs.stack.broker_url.split(":")[0]
    print(
        f"\nFIGURE node-intake {scheme}: most_held={sampler.most} "
        f"(bound {MOST_HELD}) nodes_run={shares} dry_while_backlog_samples="
        f"{sampler.dry_while_backlog}/{sampler.samples} wall_s={report['wall_s']:.1f}"
    )
    assert sum(shares) == 96
    assert sampler.samples > 10 and max(sampler.most) <= MOST_HELD, sampler.most
    assert min(sampler.most) >= NODE_THREADS  # each ran its node threads' worth at once
    assert min(shares) >= 96 // 4, shares


def test_with_quorum_queues_a_worker_keeps_celerys_prefetch(
    redis_server,  # type: ignore[no-untyped-def]
    tmp_logs: Path,
) -> None:
    # RabbitMQ applies a per-consumer prefetch (quorum queues) only to consumers started
    # after it: the worker says so and takes -c messages, as Celery does (the README's rule:
    # keep -c x nodes per message near the node threads).
    env = {**WORKER_ENV, "SWARM_QUORUM_QUEUES": "true"}
    with rabbit.vhost() as url, fault_stack(redis_server, tmp_logs, SIM_ARGS, env, url) as qs:
        (worker,) = qs.ensure_workers(["quorum"], TASK_THREADS)
        assert "node-counted intake off: per-consumer QoS" in worker.log_text()
        handle = qs.client().submit(items(32), "Review", aggregate_instruction=AGGREGATE)
        wait_until(
            lambda: len(task_lines(worker.log_text(), handle.id, "received")) == 4,
            60,
            "Celery's prefetch: every message on the one worker",
        )
        assert handle.wait(timeout=120).to_dict()["status"] == "succeeded"
