"""A task's next run waits in Redis, not in a worker (workers.deferral): a worker killed
in the window no lease covers costs seconds, and a cancel ends nodes waiting in countdowns
at once. On the Redis broker and behind RabbitMQ (the job store on Redis); real
redis-server, the simulator over HTTP, `celery -A workers worker` processes.

The kill is deterministic: SWARM_TEST_SIGKILL_ON_RECEIPT makes a worker SIGKILL itself on
receiving a task's next run, before leasing it and once the run before it let its lease go
(workers.leases). Before the deferral, that run was a countdown message the same worker
had received and held, and so was the job's watch: both waited out the Redis broker's
visibility timeout (900 s), and a batch job's report never came (issue 39, the flake of
test_batch_faults_e2e::test_sigkill_of_the_polling_worker_mid_batch).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import procs
import pytest
from faults import BrokerStack, FaultStack, inputs, wait_until

from swarm.jobs.queueing import BATCH_POLL_TASK, SUBAGENT_TASK, WATCH_TASK
from swarm.records import InputItem
from swarm.store.batches import batch_store

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("deferred_runs")]

MODEL = "kimi-k2.5"
LEASE_S = 2.0
RECOVERY_S = 30.0
"""The job ends within this of the kill (the issue's bound; a generous timeout on the
report, never a timing assertion). Without the deferral it took the visibility timeout."""
CANCEL_S = 5.0
"""A cancelled job whose nodes wait in countdowns has its report within this."""
BROKER_STACK = BrokerStack(
    "deferred",
    ("--batch-processing-s", "6", "--latency-ms", "300", "--seed", "21"),
    {"SWARM_LEASE_S": str(LEASE_S), "SWARM_NODES_PER_TASK": "1"},
)
"""Leases of 2 s (sweeps every 0.4 s), the broker's visibility timeout left at 900 s."""
REQUEUE = {"SWARM_ADMISSION_MAX_WAIT_S": "0.3", "SWARM_ADMISSION_MAX_COUNTDOWN_S": "2"}
"""A node admission cannot admit within 0.3 s goes back to the queue, 2 s at most."""


@pytest.fixture(autouse=True)
def _stop_workers(broker_fs: FaultStack) -> Iterator[None]:
    """Each test starts its own workers; none outlives it (the stack is the module's)."""
    yield
    broker_fs.stop_others(keep=[])


def kill_on_receipt(task: str) -> dict[str, str]:
    return {"SWARM_TEST_SIGKILL_ON_RECEIPT": task}


def limited(broker_fs: FaultStack, limit: str, value: int) -> dict[str, str]:
    """Worker and producer environment: REQUEUE, and the stack's catalog with ``limit``
    (``rpm``, ``rps``) set to ``value`` for every model."""
    roomy = Path(broker_fs.env["SWARM_CONFIG"])
    catalog = roomy.with_name(f"catalog-{limit}-{value}.toml")
    catalog.write_text(re.sub(rf"(?m)^{limit} = .*$", f"{limit} = {value}", roomy.read_text()))
    return {**REQUEUE, "SWARM_CONFIG": str(catalog)}


def died(worker: procs.Proc) -> bool:
    return not worker.alive


def test_sigkill_on_receipt_of_a_batch_polls_next_step(broker_fs: FaultStack) -> None:
    victim = broker_fs.ensure_workers(["poll-victim"], 4, kill_on_receipt(BATCH_POLL_TASK))[0]
    client = broker_fs.client()
    stats_before = broker_fs.stack.stats()["batch"]
    handle = client.submit(inputs(3, "poll"), "Extract x", deadline_s=600)
    wait_until(lambda: died(victim), 60, "the worker killed on receiving the poll's next step")
    assert "SWARM_TEST_SIGKILL_ON_RECEIPT" in victim.log_text()
    state = batch_store(client.store).get(handle.id, 0)
    assert state is not None and state.batch_id is not None
    broker_fs.ensure_workers(["poll-heir"], 4)
    report = handle.wait(timeout=RECOVERY_S).to_dict()
    assert report["status"] == "succeeded", report.get("error")
    stats = broker_fs.stack.stats()["batch"]
    assert stats["batches_created"] == stats_before["batches_created"] + 1  # never again
    billed = stats["lines_billed"] - stats_before["lines_billed"]
    assert report["models"][MODEL]["batch_calls"] == billed == 3  # each line billed once
    assert {node["via"] for node in report["nodes"]} == {"batch"}


def test_sigkill_on_receipt_of_a_requeued_node(broker_fs: FaultStack) -> None:
    """One call a second: admission sends the other nodes back to the queue."""
    env = limited(broker_fs, "rps", 1)
    victim = broker_fs.ensure_workers(
        ["node-victim"], 4, {**env, **kill_on_receipt(SUBAGENT_TASK)}
    )[0]
    client = broker_fs.client(**env)
    handle = client.submit(inputs(6, "requeue"), "Summarise")
    wait_until(lambda: died(victim), 60, "the worker killed on receiving a requeued node")
    broker_fs.ensure_workers(["node-heir"], 4, env)
    report = handle.wait(timeout=RECOVERY_S).to_dict()
    assert report["status"] == "succeeded", report.get("error")
    assert report["succeeded"] == 6
    assert report["models"][MODEL]["calls"] == 6 + 1  # and the aggregation: none twice


def test_sigkill_between_a_sweepers_take_and_its_send(broker_fs: FaultStack) -> None:
    """The victim's sweeper takes a requeued node falling due and is killed before it sends
    it (swarm.jobs.takeover): the take held it, so another sweeper sends it a lease later,
    not the job's watch (which, behind RabbitMQ, would wait for the stall)."""
    env = limited(broker_fs, "rps", 1)
    before_send = {"SWARM_TEST_SIGKILL_BEFORE_RESEND": SUBAGENT_TASK}
    victim = broker_fs.ensure_workers(["take-victim"], 4, {**env, **before_send})[0]
    client = broker_fs.client(**env)
    handle = client.submit(inputs(6, "take"), "Summarise")
    wait_until(lambda: died(victim), 60, "the worker killed between a take and its send")
    assert "SWARM_TEST_SIGKILL_BEFORE_RESEND" in victim.log_text()
    heir = broker_fs.ensure_workers(["take-heir"], 4, env)[0]
    report = handle.wait(timeout=RECOVERY_S).to_dict()
    assert report["status"] == "succeeded", report.get("error")
    assert report["succeeded"] == 6
    assert report["models"][MODEL]["calls"] == 6 + 1  # and the aggregation: none twice
    assert "swarm watchdog" not in heir.log_text()  # the sweep sent it, not the watch


def watched(broker_fs: FaultStack) -> tuple[int, dict[str, str]]:
    """Inputs of a job that outlasts the watch's first check, and the environment. Behind
    RabbitMQ the watch checks every half visibility timeout (no broker probes): a short
    timeout (the longest task shortened to fit) makes a check due within the job."""
    if not broker_fs.stack.broker_url.startswith("amqp"):
        return 6, {}  # a check every lease
    return 8, {  # a check every 5.5 s: the longest task 2 x (3 + 1) s + a 2 s countdown < 11 s
        "SWARM_VISIBILITY_TIMEOUT_S": "11",
        "SWARM_NODE_TIMEOUT_S": "3",
        "SWARM_MAX_ATTEMPTS": "2",
        "SWARM_BACKOFF_MAX_S": "1",
    }


def test_sigkill_of_the_worker_holding_a_jobs_watch(broker_fs: FaultStack) -> None:
    """The victim ran the watch's first check, which deferred the next one, and is killed:
    the next check waits in Redis, not in the dead worker (on the Redis broker, a countdown
    it held came back only after the visibility timeout), and the heir runs it."""
    n, watch_env = watched(broker_fs)
    env = {**limited(broker_fs, "rps", 1), **watch_env}
    victim = broker_fs.ensure_workers(["watch-victim"], 4, env)[0]
    client = broker_fs.client(**env)
    handle = client.submit(inputs(n, "watch"), "Summarise")
    watch = f"{WATCH_TASK}[{handle.id}-watch]"
    wait_until(lambda: f"{watch} retry" in victim.log_text(), 60, "the watch's first check")
    victim.kill()
    heir = broker_fs.ensure_workers(["watch-heir"], 4, env)[0]
    report = handle.wait(timeout=RECOVERY_S).to_dict()
    assert report["status"] == "succeeded", report.get("error")
    assert report["succeeded"] == n
    assert report["models"][MODEL]["calls"] == n + 1  # and the aggregation: none twice
    wait_until(lambda: f"{watch} received" in heir.log_text(), RECOVERY_S, "the next check")


def test_cancel_ends_nodes_waiting_in_countdowns_in_seconds(broker_fs: FaultStack) -> None:
    """A catalog of 2 requests a minute: admission sends the other nodes back to the queue
    for up to a minute; a cancel makes them run at once, and end cancelled."""
    env = {**limited(broker_fs, "rpm", 2), "SWARM_ADMISSION_MAX_COUNTDOWN_S": "60"}
    worker = broker_fs.ensure_workers(["cancel"], 4, env)[0]
    client = broker_fs.client(**env)
    items = [InputItem(ref=f"c{i}", text=f"cancel me {i}") for i in range(8)]
    handle = client.submit(items, "Summarise")
    retry = re.compile(rf"swarm\.subagent\[{re.escape(handle.id)}-[^\]]+\] retry: Retry in ")
    wait_until(lambda: bool(retry.search(worker.log_text())), 60, "nodes in a countdown")
    handle.cancel()
    report = handle.wait(timeout=CANCEL_S).to_dict()
    assert report["status"] == "cancelled"
    assert "cancelled" in {node["error_kind"] for node in report["nodes"]}
