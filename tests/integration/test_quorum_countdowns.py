"""Countdowns on RabbitMQ quorum queues (SWARM_QUORUM_QUEUES=true) wait in RabbitMQ's delay
exchanges, not in a worker's prefetch window (swarm.jobs.delayed_delivery): a countdown task
does not hold the worker's one slot, a retry keeps its queue, a sub-second countdown is sent,
and a producer may send a countdown before any worker declared the delay exchanges.

Each test has a vhost of its own (quorum queues cannot be redeclared as classic ones)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import procs
import pytest
import rabbit
from faults import fault_stack, inputs, wait_until
from kombu import Connection

from swarm.catalog import load_catalog
from swarm.jobs.queueing import WATCH_TASK, declared_queues, make_celery
from swarm.records import InputItem
from swarm.settings import Settings

pytestmark = pytest.mark.integration

QUORUM = {"SWARM_QUORUM_QUEUES": "true"}
LATE_S = 15
"""Countdown of the task that must not hold the worker: far longer than the plain job takes."""
SIM_ARGS = ["--latency-ms", "50", "--seed", "3"]


def test_a_countdown_task_does_not_hold_the_workers_only_slot(
    redis_server,  # type: ignore[no-untyped-def]
    tmp_logs: Path,
) -> None:
    with rabbit.vhost() as url, fault_stack(redis_server, tmp_logs, SIM_ARGS, QUORUM, url) as qs:
        (worker,) = qs.ensure_workers(["one"], 1)  # one task thread: prefetch 1 per queue
        client = qs.client()
        queue = client.catalog.route("aggregate").queue  # the job's watch and aggregation
        # A watch of a job that does not exist: it ends at once once it runs.
        client.app.send_task(WATCH_TASK, args=("nojob", None), queue=queue,
                             task_id="nojob-watch-late", countdown=LATE_S)  # fmt: skip
        late = re.escape("Task swarm.watch[nojob-watch-late] succeeded")
        handle = client.submit(inputs(4), "Review", aggregate_instruction="Merge.")
        report = handle.wait(timeout=LATE_S * 4).to_dict()
        late_ran_before = re.search(late, worker.log_text()) is not None
        print(f"quorum countdown: plain job wall_s={report['wall_s']:.1f} behind a {LATE_S} s "
              f"countdown task; that task ran first: {late_ran_before}")  # fmt: skip
        assert report["status"] == "succeeded" and report["succeeded"] == 4
        assert not late_ran_before, "the plain job waited behind the countdown task"
        wait_until(lambda: re.search(late, worker.log_text()) is not None, LATE_S * 4,
                   "the countdown task, once its countdown passed")  # fmt: skip
        log = worker.log_text()
        assert "direct exchange" not in log.lower() and "Traceback" not in log
        names = list(client.catalog.queues())
        bindings = set(rabbit.bindings(url))
        for name in names:  # the queue's own key, the delay's key, the delivery exchange's
            assert {(name, name, name), (name, name, f"#.{name}")} <= bindings
            assert ("celery_delayed_delivery", name, f"#.{name}") in bindings
        assert len([b for b in bindings if b[1] in names]) == 3 * len(names)


REQUEUE = {
    **QUORUM,
    "SWARM_MAX_ATTEMPTS": "2",
    "SWARM_ADMISSION_MAX_WAIT_S": "0.3",  # the simulator's Retry-After 1 s: back to the queue
    "SWARM_ADMISSION_MAX_COUNTDOWN_S": "0.5",  # a sub-second countdown
    "SWARM_NODES_PER_TASK": "1",
}
LIMITED = "[[sim:status=429]]"


def test_requeued_nodes_come_back_to_their_own_queue_after_a_sub_second_countdown(
    redis_server,  # type: ignore[no-untyped-def]
    tmp_logs: Path,
) -> None:
    with rabbit.vhost() as url, fault_stack(redis_server, tmp_logs, SIM_ARGS, REQUEUE, url) as qs:
        client = qs.client()
        model, aggregation = (
            client.catalog.models["gemini-2.5-flash"],
            client.catalog.route("aggregate"),
        )
        assert model.queue != aggregation.queue
        workers = {}
        for name, queue in (("model", model.queue), ("aggregation", aggregation.queue)):
            workers[name] = procs.start_celery_worker(qs.env, queue, 1, f"{name}@%h", tmp_logs)
            qs.stack.workers.append(workers[name])
        texts = [f"input {i} {LIMITED if i < 2 else ''}" for i in range(4)]
        items = [InputItem(ref=f"in-{i}", text=text) for i, text in enumerate(texts)]
        handle = client.submit(items, "Summarise", model="gemini-2.5-flash",
                               aggregate_instruction="Merge.")  # fmt: skip
        report = handle.wait(timeout=120).to_dict()
        limited = [node for node in report["nodes"] if node["error_kind"] == "rate_limited"]
        assert report["succeeded"] == 2 and len(limited) == 2
        assert all(node["attempts"] == 2 for node in limited)  # one requeue each
        runs = re.compile(rf"Task swarm\.subagent\[({re.escape(handle.id)}-[^\]]+)\] received")
        on_model = runs.findall(workers["model"].log_text())
        assert len(on_model) == 4 + 2, on_model  # 4 nodes, 2 of them requeued once
        assert runs.findall(workers["aggregation"].log_text()) == []


def test_a_producer_sends_countdowns_before_any_worker_and_retries_keep_their_queue() -> None:
    catalog = load_catalog(None)
    default, other, third = catalog.queues()[:3]
    with rabbit.vhost() as url:
        settings = Settings(broker_url=url, result_url="redis://127.0.0.1:1/1", quorum_queues=True)
        # (no worker, no result store: the messages stay in their queues, read below)
        app = make_celery(settings, catalog)
        # A retry's options (Task.signature_from_request): its delivery's exchange and
        # routing key, no queue; a countdown under a second, as admission may ask.
        app.send_task("probe", args=("retried",), exchange=other, routing_key=other,
                      countdown=0.4, ignore_result=True)  # fmt: skip
        app.send_task("probe", args=("plain",), queue=third, ignore_result=True)
        got = received(url, settings, [default, other, third], want=2)
    assert got == {other: ["retried"], third: ["plain"]}


def received(url: str, settings: Settings, names: list[str], want: int) -> dict[str, list[str]]:
    """The first argument of each message that reaches the queues, by queue, once ``want``
    arrived (polled; 60 s at most), and another second for strays."""
    got: dict[str, list[str]] = {}
    deadline = time.monotonic() + 60
    settle_until = None
    with Connection(url) as conn:  # type: ignore[no-untyped-call]
        queues = [q.bind(conn.default_channel) for q in declared_queues(settings, names)]
        while settle_until is None or time.monotonic() < settle_until:
            assert time.monotonic() < deadline, f"only {got} arrived"
            for queue in queues:
                message = queue.get(no_ack=True)
                if message is not None:
                    got.setdefault(queue.name, []).append(message.decode()[0][0])
            if settle_until is None and sum(map(len, got.values())) >= want:
                settle_until = time.monotonic() + 1
            time.sleep(0.05)
    return got
