"""Several nodes per task: which nodes go together, and running them (swarm.jobs.batch)."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx2
import pytest
from doubles import MockGateway, completion, job_spec

from swarm.calls.runtime import Runtime
from swarm.catalog import load_catalog
from swarm.errors import RetryLater
from swarm.jobs import batch
from swarm.jobs.batch import run_nodes
from swarm.jobs.fanout import header_signatures, node_batches, nodes_per_task
from swarm.jobs.queueing import SUBAGENT_TASK, SUBAGENTS_TASK, make_celery
from swarm.jobs.subagent import NodeCall
from swarm.records import JobSpec, NodeTask
from swarm.settings import Settings

MakeRuntime = Callable[..., tuple[Runtime, MockGateway]]


def job(rt: Runtime | None, n: int, tasks: dict[str, NodeTask] | None = None) -> JobSpec:
    spec = job_spec(n, tasks=tasks or {})
    if rt is not None:
        rt.store.create_job(spec, [f"input {i}" for i in range(n)])
    return spec


@pytest.mark.parametrize(
    ("setting", "nodes", "per_task"),
    [
        (0, 1, 1),
        (0, 49, 1),
        (0, 50, 5),
        (0, 100, 10),
        (0, 101, 11),
        (0, 160, 16),
        (0, 5000, 16),
        (3, 10, 3),
    ],
)
def test_nodes_per_task(setting: int, nodes: int, per_task: int) -> None:
    assert nodes_per_task(setting, nodes) == per_task


def test_batches_keep_queues_apart_and_input_order() -> None:
    flash = NodeTask(model="gemini-2.5-flash", instruction="x")
    spec = job(None, 7, {"n01": flash, "n04": flash})
    batches = node_batches(spec, ((n, None) for n in spec.node_ids), load_catalog(), 3)
    assert [(queue, tuple(n for n, _ in nodes)) for queue, nodes in batches] == [
        ("llm.kimi-k2.5", ("n00", "n02", "n03")),
        ("llm.kimi-k2.5", ("n05", "n06")),
        ("llm.gemini-2.5-flash", ("n01", "n04")),
    ]


def test_header_uses_the_single_node_task_for_batches_of_one() -> None:
    spec = job(None, 3)
    app = make_celery(Settings(), load_catalog())
    sizes = [(n, 10) for n in spec.node_ids]
    single = list(header_signatures(app, load_catalog(), spec, sizes, per_task=1))
    assert [s.task for s in single] == [SUBAGENT_TASK] * 3
    assert single[0].options["task_id"] == "j1-n00"
    both = list(header_signatures(app, load_catalog(), spec, sizes, per_task=2))
    assert [(s.task, s.args) for s in both] == [
        (SUBAGENTS_TASK, ("j1", ["n00", "n01"])),
        (SUBAGENT_TASK, ("j1", "n02")),
    ]
    assert both[0].options["task_id"] == "j1-n00-n01"
    assert "nodes=n00..n01 (2)" in both[0].options["argsrepr"]


def answer(body: dict[str, Any], n: int) -> httpx2.Response:
    last = body["messages"][-1]["content"]
    if "input 1" in last:
        return httpx2.Response(400, json={"error": {"message": "bad input"}})
    return completion("ok:" + last[-7:])


def test_run_nodes_calls_each_node_once_and_reuses_ok_ones(make_runtime: MakeRuntime) -> None:
    rt, gw = make_runtime(answer)
    job(rt, 4)
    first = run_nodes(rt, "j1", ["n00", "n01", "n02", "n03"])
    assert [(e.node_id, e.status) for e in first.envelopes] == [
        ("n00", "ok"),
        ("n01", "error"),
        ("n02", "ok"),
        ("n03", "ok"),
    ]
    assert len(gw.requests) == 4 and first.requeue == ()
    again = run_nodes(rt, "j1", ["n00", "n01", "n02", "n03"])  # a redelivered message
    assert len(gw.requests) == 5  # only the failed node called again
    assert [e.status for e in again.envelopes] == ["ok", "error", "ok", "ok"]
    progress = rt.store.progress("j1")
    assert (progress.done, progress.failed, progress.in_flight) == (3, 1, 0)


def test_run_nodes_of_a_cancelled_job_call_nothing(make_runtime: MakeRuntime) -> None:
    rt, gw = make_runtime(answer)
    job(rt, 3)
    rt.store.cancel("j1")
    outcome = run_nodes(rt, "j1", ["n00", "n01", "n02"])
    assert gw.requests == []
    assert {str(e.error_kind) for e in outcome.envelopes} == {"cancelled"}


def test_nodes_waiting_for_a_thread_when_the_job_is_cancelled_call_nothing(
    make_runtime: MakeRuntime,
) -> None:
    rt, gw = make_runtime(lambda body, n: completion("ok"))
    job(rt, 3)

    def cancel_then_answer(body: dict[str, Any], n: int) -> httpx2.Response:
        rt.store.cancel("j1")  # while n00 calls, n01 and n02 wait for the one thread
        time.sleep(batch.CANCEL_RECHECK_S)  # a call as long as the flag's recheck
        return completion("ok")

    gw.handler = cancel_then_answer
    with ThreadPoolExecutor(max_workers=1) as pool:
        outcome = run_nodes(rt, "j1", ["n00", "n01", "n02"], pool=pool)
    assert len(gw.requests) == 1
    assert [(e.node_id, e.status, e.error_kind) for e in outcome.envelopes] == [
        ("n00", "ok", None),
        ("n01", "error", "cancelled"),
        ("n02", "error", "cancelled"),
    ]


@pytest.mark.parametrize(("recheck_s", "rereads"), [(3600.0, 0), (0.0, 5)])
def test_short_calls_do_not_read_the_cancel_flag_each(
    make_runtime: MakeRuntime, monkeypatch: pytest.MonkeyPatch, recheck_s: float, rereads: int
) -> None:
    """Six nodes on one thread, each ending in a few milliseconds: the flag is read again
    only once the last read is CANCEL_RECHECK_S old (an hour: never; 0: before each node
    after the first)."""
    monkeypatch.setattr(batch, "CANCEL_RECHECK_S", recheck_s)
    rt, gw = make_runtime(lambda body, n: completion("ok"))
    job(rt, 6)
    reads: list[str] = []
    read = rt.store.cancelled
    monkeypatch.setattr(rt.store, "cancelled", lambda job_id: reads.append(job_id) or read(job_id))
    with ThreadPoolExecutor(max_workers=1) as pool:
        outcome = run_nodes(rt, "j1", [f"n0{i}" for i in range(6)], pool=pool)
    assert [e.status for e in outcome.envelopes] == ["ok"] * 6
    assert len(gw.requests) == 6
    loading = 1  # the memory store's load_nodes reads the flag with the nodes
    assert len(reads) == loading + rereads


def test_only_the_nodes_admission_sends_back_are_requeued(
    make_runtime: MakeRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt, _ = make_runtime(answer)
    job(rt, 3)
    import swarm.jobs.batch as batch

    real = batch.call_node

    def fake(rt: Runtime, spec: JobSpec, node_id: str, text: str, call: NodeCall) -> Any:
        if node_id == "n02":
            raise RetryLater(1.5, "rpm")
        return real(rt, spec, node_id, text, call)

    monkeypatch.setattr(batch, "call_node", fake)
    outcome = run_nodes(rt, "j1", ["n00", "n01", "n02"], may_requeue=True)
    assert [e.node_id for e in outcome.envelopes] == ["n00", "n01"]
    assert (outcome.requeue, outcome.delay_s) == (("n02",), 1.5)
