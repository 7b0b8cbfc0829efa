"""A worker takes another message only while its node threads can run the nodes it
holds (workers/intake.py), so the rest of a job stays in the broker's queue for any idle
worker instead of waiting in one worker's prefetch."""

from __future__ import annotations

import json
import time

import pytest
import redis
from stack import Stack, Worker, stack_fixture

from swarm.client import SwarmClient
from swarm.jobs.queueing import SUBAGENTS_TASK
from swarm.records import InputItem

pytestmark = pytest.mark.integration

QUEUE = "llm.kimi-k2.5"
NODE_THREADS = 8


stack = stack_fixture(
    ["--latency-ms", "2000"],
    Worker("intake", QUEUE, c=4, env={"SWARM_NODE_THREADS": str(NODE_THREADS)}),
)


def queued_batches(client: redis.Redis, queue: str) -> int:
    """swarm.subagents messages waiting in the broker's lists of ``queue`` (one per
    priority; the job's watchdog message waits there too)."""
    keys = [k for k in client.scan_iter(match=f"{queue}*") if client.type(k) == b"list"]
    bodies = [m for k in keys for m in client.lrange(k, 0, -1)]
    return sum(1 for m in bodies if json.loads(m)["headers"]["task"] == SUBAGENTS_TASK)


def test_a_worker_holds_no_more_nodes_than_its_node_threads(stack: Stack) -> None:
    # 32 nodes in 4 messages of 8, one worker with 4 task threads and 8 node threads:
    # Celery's prefetch (4 messages) would take all 32 nodes at once; the node count lets
    # it hold one message while its 8 calls run, and 3 stay queued for other workers.
    stack.reset_stats()
    client = SwarmClient.from_settings(stack.settings(nodes_per_task=NODE_THREADS))
    broker = redis.Redis.from_url(stack.broker_url)
    items = [InputItem(ref=f"d{i}", text=f"diff {i}") for i in range(32)]
    handle = client.submit(items, "Review", aggregate_instruction="Merge. [[sim:latency_ms=10]]")
    deadline = time.monotonic() + 60
    while int(stack.stats()["inflight"]) < NODE_THREADS and time.monotonic() < deadline:
        time.sleep(0.05)
    inflight, queued = int(stack.stats()["inflight"]), queued_batches(broker, QUEUE)
    assert (inflight, queued) == (NODE_THREADS, 3)

    report = handle.wait(timeout=120)
    assert report["status"] == "succeeded"
    assert sum(1 for node in report["nodes"] if node["status"] == "ok") == 32
    assert stack.stats()["max_inflight_seen"] <= NODE_THREADS + 1  # + the aggregation
    broker.close()
