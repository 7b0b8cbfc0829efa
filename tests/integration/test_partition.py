"""A worker host cut off by a network partition: fenced while cut, back to work once healed.

Real processes: redis-server (broker and job store) and the simulator (1 s answers), both
bound to the host side of a veth pair as well as 127.0.0.1; two ``celery -A workers worker``
processes on this host and a third in a network namespace of its own that reaches Redis and
the simulator only through the veth (tests/integration/netns.py). Leases are 2 s. With the
cut worker running leased tasks, the link goes down until its leases lapsed (five leases),
then up: the other workers took its tasks over, the job completes, the cut worker's runs are
fenced (every node's envelope the report's; the ledger counts each billed call once and
equals the simulator's), and the cut worker takes work of a second job.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import netns
import procs
import pytest
from failover import client_for, settled_tally, sim_stats, start_workers, wait_report
from faults import inputs, roomy_catalog, task_lines, wait_until
from stack import local_catalog
from test_takeover import SETTLED, settled_in_log

from swarm.procs.process import unique_log
from swarm.procs.services import started

pytestmark = pytest.mark.integration

LEASE_S = 2.0
FAULT_S = 5 * LEASE_S
ENV = {
    "SWARM_LEASE_S": str(LEASE_S),
    "SWARM_VISIBILITY_TIMEOUT_S": "30",
    "SWARM_UNACKED_RESTORE_INTERVAL_S": "2",
    "SWARM_NODE_TIMEOUT_S": "6",
    "SWARM_MAX_ATTEMPTS": "3",
    "SWARM_BACKOFF_MAX_S": "1",
    "SWARM_ADMISSION_MAX_COUNTDOWN_S": "5",
    "SWARM_API_KEY": "sk-swarm-test-not-a-real-key",
}
THREADS = 4


@pytest.fixture
def cut_net() -> Iterator[netns.Partition]:
    part = netns.partition()
    try:
        yield part
    finally:
        part.close()


def read_late_catalog(path: Path) -> Path:
    """The roomy catalog with its backend declared local, so that a request past its node
    timeout is still read (overtime) and its answer billed once the link heals: the
    simulator answers the cut worker's requests while the link is down, and the ledger can
    equal its count only if those answers are read. (A hosted backend closes its requests
    at the node timeout: answers the gateway sent into a partition are billed by it but
    never reach the ledger; docs/ha.md.)"""
    return local_catalog(path, roomy_catalog(path).read_text("utf-8"))


def start_sim_on(host: str, logs: Path) -> tuple[procs.Proc, str]:
    """The simulator on ``host`` (answers in 1 s)."""
    port = procs.free_port()
    argv = [
        *(sys.executable, "-m", "swarm.cli.main", "sim", "--host", host, "--port", str(port)),
        *("--latency-ms", "1000", "--seed", "15"),
    ]
    proc = procs.Proc(argv, unique_log(logs, f"sim-{port}"), cwd=procs.REPO_ROOT, name="sim")
    health = f"http://{host}:{port}/health"
    started(proc, lambda: procs.http_status(health, 1.0) == 200, 30, "answering /health")
    return proc, f"http://{host}:{port}/v1"


def open_leases(log: str, job_id: str) -> list[str]:
    """Lease keys of the job's tasks the log shows received and not ended."""
    open_ids = task_lines(log, job_id, "received") - task_lines(log, job_id, SETTLED)
    return [f"swarm:{{job:{job_id}}}:task:{task_id}" for task_id in open_ids]


def test_a_partitioned_worker_is_fenced_and_rejoins(
    cut_net: netns.Partition, redis_factory: object, tmp_logs: Path
) -> None:
    server = redis_factory(  # type: ignore[operator]
        extra_args=["--bind", "127.0.0.1", cut_net.host_ip, "--protected-mode", "no"]
    )
    sim, base_url = start_sim_on(cut_net.host_ip, tmp_logs)
    env = {
        **ENV,
        "SWARM_BROKER_URL": f"redis://{cut_net.host_ip}:{server.port}/0",
        "SWARM_BASE_URL": base_url,
        "SWARM_CONFIG": str(read_late_catalog(tmp_logs / "catalog.toml")),
    }
    workers = start_workers(env, ["w1", "w2"], THREADS, tmp_logs)
    [cut] = start_workers(env, ["w3"], THREADS, tmp_logs, prefix=cut_net.prefix)
    try:
        partitioned_job(cut_net, server, env, cut)
    finally:
        for proc in [cut, *workers, sim]:
            proc.terminate(10)


def partitioned_job(
    cut_net: netns.Partition, server: procs.RedisServer, env: dict[str, str], cut: procs.Proc
) -> None:
    client = client_for(env)
    store = server.client(db=1)
    handle = client.submit(inputs(36, "partition"), "Summarise this document")

    def leased() -> bool:
        keys = open_leases(cut.log_text(), handle.id)
        return bool(keys) and store.exists(*keys) == len(keys)

    wait_until(leased, 60, "w3 running leased tasks")
    held = open_leases(cut.log_text(), handle.id)
    tokens = dict(zip(held, store.mget(held), strict=True))
    cut_net.cut()
    cut_at = time.monotonic()

    def lapsed() -> bool:  # no key holds w3's token (gone, or another run's now)
        now = dict(zip(held, store.mget(held), strict=True))
        return all(now[key] != token for key, token in tokens.items())

    try:
        # its leases lapse (nobody renews them) and the others take its tasks over
        wait_until(lapsed, 30, "w3's task leases lapsed")
        lapsed_s = time.monotonic() - cut_at
        time.sleep(max(0.0, FAULT_S - (time.monotonic() - cut_at)))  # the fault's length
    finally:
        cut_net.heal()
    report = wait_report(handle, 120)
    assert report["status"] == "succeeded", report.get("error")
    assert (report["succeeded"], report["failed"]) == (36, 0)
    # w3's runs end after the heal: fenced, they stored nothing over the new holders'
    wait_until(lambda: settled_in_log(cut.log_text(), handle.id), 90, "w3's runs ended")
    after = client.attach(handle.id).report()
    after = None if after is None else after.to_dict()
    assert after is not None and after["nodes"] == report["nodes"]
    stats = partial(sim_stats, env["SWARM_BASE_URL"])
    counted = settled_tally(client, handle.id, stats)
    assert counted.equal, counted
    assert stats()["slots"]["overlaps"] == 0
    # healed, w3 takes work again
    again = client.submit(inputs(24, "after the partition"), "Summarise this document")
    assert wait_report(again, 120)["status"] == "succeeded"
    ran = task_lines(cut.log_text(), again.id, "succeeded")
    assert ran, "w3 took no task of the job after the heal"
    store.close()
    print(
        f"\nFIGURE partition: cut_to_lapsed_s={lapsed_s:.1f} held_tasks={len(held)} "
        f"ledger_calls={counted.ledger_calls} sim_completed={counted.sim_completed} "
        f"sim_requests={stats()['requests']} w3_tasks_after_heal={len(ran)} "
        f"wall_s={report['wall_s']:.1f}"
    )
