"""A Redis primary killed in the middle of a 1,000-input job, behind Sentinel.

Real processes: a primary, one replica and three sentinels (``down-after-milliseconds``
1000), the simulator over HTTP (0-20 ms answers), and two ``celery -A workers worker``
processes whose broker (or, with RabbitMQ as broker, only the result backend and the job
store) is ``sentinel://``. The primary is SIGKILLed with about a third of the nodes done:
the job completes after the promotion without restarting anything, every node ends once
(one ok envelope each), and the ledger's calls and tokens equal the simulator's. With 2 s
leases a failover of about 2 s lets some leases lapse, so some nodes are called again by
the run that took them over: billed and counted, never lost. The time from the kill to a
node ending after the promoted primary first answered is printed (never asserted).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import procs
import pytest
import rabbit
from failover import (
    client_for,
    done,
    settled_tally,
    sim_stats,
    start_workers,
    wait_progress_after,
    wait_report,
)
from faults import inputs, roomy_catalog, wait_until
from sentinel import MASTER, SentinelGroup, sentinel_group
from stack import API_KEY

pytestmark = pytest.mark.integration

NODES = 1000
KILL_AT = 300
SIM_ARGS = ["--latency-p50-ms", "5", "--latency-p99-ms", "20", "--seed", "27"]
ENV = {
    "SWARM_SENTINEL_MASTER": MASTER,
    "SWARM_API_KEY": API_KEY,
    # Leases and the Redis broker's redelivery scaled down (tests/integration/test_takeover.py):
    # a message the failover lost is sent again within seconds.
    "SWARM_LEASE_S": "2",
    "SWARM_VISIBILITY_TIMEOUT_S": "30",
    "SWARM_UNACKED_RESTORE_INTERVAL_S": "2",
    "SWARM_NODE_TIMEOUT_S": "6",
    "SWARM_MAX_ATTEMPTS": "3",
    "SWARM_BACKOFF_MAX_S": "1",
    "SWARM_ADMISSION_MAX_COUNTDOWN_S": "5",
}


@pytest.fixture
def group(tmp_logs: Path) -> Iterator[SentinelGroup]:
    with sentinel_group(tmp_logs) as running:
        yield running


@pytest.fixture(params=["redis", "amqp"])
def broker(request: pytest.FixtureRequest, group: SentinelGroup) -> Iterator[str]:
    """The broker URL: the Sentinel group's db 0, or a RabbitMQ vhost of this test's."""
    if request.param == "redis":
        yield group.url(0)
        return
    with rabbit.vhost() as url:
        yield url


def test_a_killed_primary_is_replaced_and_the_job_completes(
    group: SentinelGroup, broker: str, tmp_logs: Path
) -> None:
    sim, base_url = procs.start_sim(SIM_ARGS, tmp_logs)
    env = {
        **ENV,
        "SWARM_BROKER_URL": broker,
        "SWARM_RESULT_URL": group.url(1),
        "SWARM_BASE_URL": base_url,
        "SWARM_CONFIG": str(roomy_catalog(tmp_logs / "catalog.toml")),
    }
    workers = start_workers(env, ["w1", "w2"], 16, tmp_logs)
    try:
        failover_job(group, env, workers)
    finally:  # before the vhost goes
        for proc in [*workers, sim]:
            proc.terminate(10)


def failover_job(group: SentinelGroup, env: dict[str, str], workers: list[procs.Proc]) -> None:
    """The job, the kill, and what must hold afterwards."""
    client = client_for(env)
    handle = client.submit(inputs(NODES, "failover"), "Summarise this document")
    wait_until(lambda: (done(handle) or 0) >= KILL_AT, 120, f"{KILL_AT} nodes done")
    old = group.master_port()
    assert old is not None
    group.primary.kill()
    killed_at = time.monotonic()
    promoted_s = group.wait_promoted(old, 60)
    # progress again: a node ending after the first count the promoted primary answers
    wait_until(lambda: done(handle) is not None, 60, "the store answering again")
    seen = done(handle) or 0
    wait_progress_after(handle, seen, 120)
    to_progress_s = time.monotonic() - killed_at
    report = wait_report(handle, 180)
    kill_to_report_s = time.monotonic() - killed_at

    assert report["status"] == "succeeded", report.get("error")
    assert (report["total"], report["succeeded"], report["failed"]) == (NODES, NODES, 0)
    assert len({node["node_id"] for node in report["nodes"]}) == NODES
    assert all(node["status"] == "ok" for node in report["nodes"])
    stats = partial(sim_stats, env["SWARM_BASE_URL"])
    counted = settled_tally(client, handle.id, stats)
    assert counted.equal, counted
    assert all(w.alive for w in workers), "a worker died in the failover"
    broker_kind = "amqp" if env["SWARM_BROKER_URL"].startswith("amqp") else "redis"
    print(
        f"\nFIGURE sentinel-failover[{broker_kind}]: nodes={NODES} done_after_promotion={seen} "
        f"promoted_s={promoted_s:.1f} kill_to_progress_s={to_progress_s:.1f} "
        f"kill_to_report_s={kill_to_report_s:.1f} wall_s={report['wall_s']:.1f} "
        f"ledger_calls={counted.ledger_calls} sim_completed={counted.sim_completed} "
        f"ledger_tokens={counted.ledger_prompt}+{counted.ledger_completion} "
        f"sim_tokens={counted.sim_prompt}+{counted.sim_completion} "
        f"sim_requests={stats()['requests']}"
    )
