"""Worker faults: a worker SIGKILLed mid-swarm, a message the broker lost, and a
worker stopped with SIGTERM.

Real redis-server, the simulator answering every call in 2 s, and `celery -A workers worker`
processes (threads pool, 4 threads each, 4 nodes per task message) with settings that bound
the longest task to 4.75 s and a 5 s visibility timeout swept every second
(faults.FAST_RECOVERY).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from faults import (
    FAST_RECOVERY,
    FaultStack,
    aggregate_runs,
    fault_stack,
    inputs,
    nodes_of,
    task_lines,
    wait_until,
)

pytestmark = pytest.mark.integration

LATENCY_MS = 2000
THREADS = 4


@pytest.fixture(scope="module")
def fs(redis_server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultStack]:  # type: ignore[no-untyped-def]
    logs = tmp_path_factory.mktemp("worker-faults")
    sim_args = ["--latency-ms", str(LATENCY_MS), "--seed", "7"]
    with fault_stack(redis_server, logs, sim_args, FAST_RECOVERY) as stack:
        yield stack


def test_a_killed_worker_s_calls_come_back_after_the_visibility_timeout(fs: FaultStack) -> None:
    workers = fs.ensure_workers(["w1", "w2", "w3"], THREADS)
    victim, survivors = workers[2], workers[:2]
    fs.stack.reset_stats()
    handle = fs.client().submit(inputs(100), "Summarise this document")
    wait_until(lambda: handle.progress().nodes_done >= 40, 90, "40 of 100 nodes done")
    victim.kill()  # SIGKILL: no warm shutdown, nothing acked, nothing restored
    killed_at = time.monotonic()
    log = victim.log_text()
    held = task_lines(log, handle.id, "received") - task_lines(log, handle.id, "succeeded")
    node_ids = list(fs.client().store.spec(handle.id).node_ids)
    in_flight = nodes_of(held, handle.id, node_ids)
    assert in_flight, "the killed worker held no task: the test proved nothing"

    report = handle.wait(timeout=120).to_dict()
    recovery_s = time.monotonic() - killed_at
    assert report["status"] == "succeeded", report.get("error")
    assert (report["succeeded"], report["failed"]) == (100, 0)
    # The killed worker's tasks were run again by the survivors: after the visibility
    # timeout (a redelivered node waits for no stale claim: claims expire with it), or, for
    # a message the kill lost in the broker, by the watchdog.
    redone = set().union(*(task_lines(w.log_text(), handle.id, "succeeded") for w in survivors))
    assert in_flight <= nodes_of(redone, handle.id, node_ids)
    resent = sum("swarm watchdog" in w.log_text() for w in survivors)
    # The aggregation ran once, and the ledger bills each node once (+1: the aggregation).
    assert aggregate_runs(fs.stack.workers, handle.id) == 1
    assert report["models"]["kimi-k2.5"]["calls"] == 101
    # The gateway saw at most the killed worker's in-flight calls twice.
    stats = fs.stack.stats()
    repeated = stats["requests"] - 101
    assert 0 <= repeated <= len(in_flight), (stats["requests"], len(in_flight))
    assert report["usage"]["prompt_tokens"] <= stats["prompt_tokens"]
    print(
        f"\nFIGURE sigkill: in_flight_killed={len(in_flight)} gateway_requests="
        f"{stats['requests']} repeated={repeated} completed={stats['completed']} "
        f"ledger_calls={report['models']['kimi-k2.5']['calls']} kill_to_report_s={recovery_s:.1f} "
        f"wall_s={report['wall_s']:.1f} watchdog_resends={resent}"
    )


QUICK = {
    # Calls of 50 ms ([[sim:latency_ms=50]]): a 2 s visibility timeout swept every 0.5 s,
    # so the watchdog calls the job stalled after 2 x 2 + 2 x 0.5 + 2 = 7 s without progress.
    "SWARM_NODE_TIMEOUT_S": "1",
    "SWARM_BACKOFF_MAX_S": "0.1",
    "SWARM_ADMISSION_MAX_COUNTDOWN_S": "0.5",
    "SWARM_VISIBILITY_TIMEOUT_S": "2",
    "SWARM_UNACKED_RESTORE_INTERVAL_S": "0.5",
}


def test_a_message_the_broker_lost_is_sent_again_by_the_watchdog(
    fs: FaultStack,
    redis_server,  # type: ignore[no-untyped-def]
) -> None:
    fs.stop_others(keep=set())  # no worker: the job's messages wait in their queue
    fs.stack.reset_stats()
    client = fs.client(**QUICK)
    handle = client.submit(
        inputs(8, "[[sim:latency_ms=50]]"),
        "Summarise this document",
        aggregate_instruction="Merge the results [[sim:latency_ms=50]]",
    )
    # Take a sub-agent message off the queue, as a worker killed right after its BRPOP does:
    # the broker has no copy left, not even in its unacked hash.
    r = redis_server.client(db=0)
    try:
        wanted = f'"id": "{handle.id}-n0000-n0003"'
        lost = [m for m in r.lrange("llm.kimi-k2.5", 0, -1) if wanted in m]
        assert len(lost) == 1 and r.lrem("llm.kimi-k2.5", 1, lost[0]) == 1
    finally:
        r.close()
    worker = fs.ensure_workers(["w1"], THREADS, QUICK)[0]
    report = handle.wait(timeout=90).to_dict()
    assert report["status"] == "succeeded", report.get("error")
    assert (report["succeeded"], report["failed"]) == (8, 0)
    assert "swarm watchdog: job" in worker.log_text()
    # The lost nodes ran once (re-sent), the others once; one aggregation.
    assert report["models"]["kimi-k2.5"]["calls"] == 9 == fs.stack.stats()["completed"]
    assert aggregate_runs([worker], handle.id) == 1
    print(f"\nFIGURE lost-message: submit_to_report_s={report['wall_s']:.1f}")
