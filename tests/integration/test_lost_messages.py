"""A message the Redis broker lost, or holds unacked for a worker that died before receiving
it, costs a few leases, not the watchdog's stall (2 x the 900 s visibility timeout + sweeps).

Real redis-server (broker and job store), the simulator answering every call in 200 ms, and
two `celery -A workers worker` processes started after the fault was staged on a queued job:
one message taken off its queue list (a worker killed after its BRPOP, before kombu recorded
it as unacked), or moved from the list into kombu's ``unacked`` hash and ``unacked_index``
with a delivery a minute old (a worker killed after recording it, before ``task_received``
leased it), or the job's watch lost as the first, beside a lost node message. Leases are 2 s
(``SWARM_TEST_LEASE_S`` sets another length, e.g. 10, the default) and the visibility
timeout is the default 900 s, so only the job's watch probing the broker
(swarm.jobs.lost_messages) can finish the job within the wait.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import procs
import pytest
from celery.canvas import Signature
from faults import FaultStack, aggregate_runs, fault_stack, inputs, wait_until

from swarm.jobs.takeover import sweep
from swarm.jobs.watchdog import stall_s
from swarm.store.leases import task_lease
from workers.leases import kept_tasks

pytestmark = pytest.mark.integration

LATENCY_MS = 200
THREADS = 4
LEASE_S = os.environ.get("SWARM_TEST_LEASE_S", "2")
QUEUE = "llm.kimi-k2.5"
"""The sub-agents' and the aggregation's queue (the aggregation's only, in the last test)."""
NODE_MODEL = "deepseek-v3.2"
NODES = 8
WAIT_S = 40 * float(LEASE_S)
"""How long a test waits for the report: generous, and far below the stall backstop."""


@pytest.fixture(scope="module")
def fs(redis_server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultStack]:  # type: ignore[no-untyped-def]
    logs = tmp_path_factory.mktemp("lost-messages")
    sim_args = ["--latency-ms", str(LATENCY_MS), "--seed", "15"]
    with fault_stack(redis_server, logs, sim_args, {"SWARM_LEASE_S": LEASE_S}) as stack:
        yield stack


def take_off_queue(fs: FaultStack, task_id: str) -> dict[str, object]:
    """Remove the message of ``task_id`` from its queue list; its payload."""
    r = fs.stack_redis(0)
    try:
        found = [m for m in r.lrange(QUEUE, 0, -1) if f'"id": "{task_id}"' in m]
        assert len(found) == 1 and r.lrem(QUEUE, 1, found[0]) == 1, found
        payload: dict[str, object] = json.loads(found[0])
        return payload
    finally:
        r.close()


def run_job(
    fs: FaultStack, marker: str, stage: Callable[[str], object]
) -> tuple[dict[str, Any], float, str]:
    """Submit a job with no worker running, stage the fault (``stage(job_id)``), start two
    workers; the report, the seconds from the workers' start to it, and their logs."""
    fs.stop_others(keep=set())  # no worker: the job's messages wait in their queue
    fs.stack.reset_stats()
    client = fs.client()
    assert stall_s(client.settings) > 1800 > WAIT_S  # the backstop cannot be what saves it
    handle = client.submit(inputs(NODES, marker), "Summarise this document")
    stage(handle.id)
    started = time.monotonic()
    workers = fs.ensure_workers(["w1", "w2"], THREADS)
    report = handle.wait(timeout=WAIT_S).to_dict()
    took_s = time.monotonic() - started
    assert report["status"] == "succeeded", report.get("error")
    assert (report["succeeded"], report["failed"]) == (NODES, 0)
    # Every node and the aggregation called once, billed once.
    assert report["models"]["kimi-k2.5"]["calls"] == NODES + 1 == fs.stack.stats()["completed"]
    assert fs.stack.stats()["requests"] == NODES + 1
    assert aggregate_runs(workers, handle.id) == 1
    return report, took_s, "".join(w.log_text() for w in workers)


def test_a_message_lost_after_its_brpop_is_sent_again_within_leases(fs: FaultStack) -> None:
    report, took_s, logs = run_job(fs, "lost", lambda job: take_off_queue(fs, f"{job}-n0003"))
    assert "lost the message(s) of n0003 in the broker" in logs
    assert "1 node(s) and the aggregation" in logs
    print(
        f"\nFIGURE lost-message-probe: lease_s={LEASE_S} workers_start_to_report_s={took_s:.1f}"
        f" wall_s={report['wall_s']:.1f} stall_s={stall_s(fs.client().settings):.0f}"
    )


def test_a_lost_watch_message_is_sent_again_and_finds_a_lost_node(
    fs: FaultStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The watch's first check, deferred at submit, is sent by a sweep as a worker's sweeper
    sends it, and the broker loses it as it loses a node's message (a worker killed after
    its BRPOP, or a Redis primary failing over between the BRPOP and kombu's record of it);
    a node's message is lost too. Only the watch can find the node: it is sent again once
    its hold lapses."""

    def stage(job_id: str) -> None:
        take_off_queue(fs, f"{job_id}-n0002")
        client = fs.client()
        watch = task_lease(job_id, f"{job_id}-watch", "").member
        wait_until(lambda: watch in client.store.lapsed_tasks(100), WAIT_S, "the watch due")
        lost: list[str] = []
        with monkeypatch.context() as patch:  # sent, and lost by the broker
            patch.setattr(Signature, "apply_async", lambda sig, *_, **__: lost.append(sig.id))
            sweep(client.store, client.app, float(LEASE_S), kept=kept_tasks(client.settings))
        assert f"{job_id}-watch" in lost

    report, took_s, logs = run_job(fs, "watch", stage)
    assert "lost the message(s) of n0002 in the broker" in logs
    print(
        f"\nFIGURE lost-watch-probe: lease_s={LEASE_S} workers_start_to_report_s={took_s:.1f}"
        f" wall_s={report['wall_s']:.1f}"
    )


def test_an_unacked_message_of_a_dead_receiver_goes_back_to_its_queue(fs: FaultStack) -> None:
    tag = "dead-receiver-tag"

    def stage(job_id: str) -> None:
        payload = take_off_queue(fs, f"{job_id}-n0005")
        properties = payload["properties"]
        assert isinstance(properties, dict)
        properties["delivery_tag"] = tag
        delivery = properties["delivery_info"]
        r = fs.stack_redis(0)
        try:  # as kombu's QoS.append records a delivery, a minute ago
            value = json.dumps([payload, delivery["exchange"], delivery["routing_key"]])
            r.zadd("unacked_index", {tag: time.time() - 60})
            r.hset("unacked", tag, value)
        finally:
            r.close()

    report, took_s, logs = run_job(fs, "unacked", stage)
    r = fs.stack_redis(0)
    try:  # restored and taken off unacked: kombu's own restore will not deliver it again
        assert r.hget("unacked", tag) is None and r.zscore("unacked_index", tag) is None
    finally:
        r.close()
    assert "swarm watchdog: job" not in logs  # restored, not re-sent
    print(
        f"\nFIGURE unacked-dead-receiver-probe: lease_s={LEASE_S} "
        f"workers_start_to_report_s={took_s:.1f} wall_s={report['wall_s']:.1f} "
        f"stall_s={stall_s(fs.client().settings):.0f}"
    )


def test_a_lost_aggregation_message_is_sent_again_within_leases(fs: FaultStack) -> None:
    """The nodes run on a worker of their model's queue only; once the chord sent the
    aggregation (to a queue nobody consumes yet), its message is taken off that queue, and
    a worker of every queue starts."""
    fs.stop_others(keep=set())
    fs.stack.reset_stats()
    client = fs.client()
    node_queue = client.catalog.model(NODE_MODEL).queue
    assert node_queue != QUEUE == client.catalog.model(client.catalog.route("aggregate").name).queue
    handle = client.submit(inputs(NODES, "aggregate"), "Summarise this document", model=NODE_MODEL)
    nodes_only = procs.start_celery_worker(fs.env, node_queue, THREADS, "n1@%h", fs.logs)
    fs.stack.workers.append(nodes_only)
    fs.named["n1"] = nodes_only
    aggregation_id = f"{handle.id}-aggregate"
    wait_until(lambda: queued_ids(fs) >= {aggregation_id}, WAIT_S, "the aggregation queued")
    take_off_queue(fs, aggregation_id)
    started = time.monotonic()
    workers = fs.ensure_workers(["w1"], THREADS)
    report = handle.wait(timeout=WAIT_S).to_dict()
    took_s = time.monotonic() - started
    assert report["status"] == "succeeded", report.get("error")
    assert (report["succeeded"], report["failed"]) == (NODES, 0)
    stats = fs.stack.stats()
    assert stats["completed"] == stats["requests"] == NODES + 1
    logs = workers[0].log_text()
    assert "lost the message(s) of <aggregation> in the broker" in logs
    assert aggregate_runs(workers, handle.id) == 1
    print(
        f"\nFIGURE lost-aggregation-probe: lease_s={LEASE_S} workers_start_to_report_s="
        f"{took_s:.1f} wall_s={report['wall_s']:.1f}"
    )


def queued_ids(fs: FaultStack) -> set[str]:
    """Task ids of the messages waiting in the aggregation's queue."""
    r = fs.stack_redis(0)
    try:
        return {json.loads(m)["headers"]["id"] for m in r.lrange(QUEUE, 0, -1)}
    finally:
        r.close()
