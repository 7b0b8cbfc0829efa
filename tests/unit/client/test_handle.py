"""SwarmHandle over the in-memory job store: the phase, the cost so far, done(), and the
typed report (its dict is the stored one)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from doubles import job_spec

from swarm.catalog import load_catalog
from swarm.client import AsyncSwarmHandle, SwarmHandle
from swarm.cost.pricing import cost_nusd, cost_usd
from swarm.errors import JobTimeoutError
from swarm.jobs.report import Report, build_report
from swarm.records import NodeEnvelope, Usage
from swarm.store import MemoryJobStore
from swarm.store.billing import BilledCall

CATALOG = load_catalog()
KIMI = CATALOG.model("kimi-k2.5")
USAGE = Usage(prompt_tokens=1000, completion_tokens=200)


def ok(node_id: str) -> NodeEnvelope:
    return NodeEnvelope(node_id=node_id, input_ref=node_id, model=KIMI.name, status="ok")


def bill(store: MemoryJobStore, job_id: str, call_id: str) -> None:
    call = BilledCall(
        call_id=call_id, model=KIMI.name, usage=USAGE, cost_nusd=cost_nusd(KIMI, USAGE)
    )
    store.record_call(job_id, call)


def written_report(store: MemoryJobStore) -> dict[str, Any]:
    return build_report(
        store.spec("j1"), store.envelopes("j1"), store.ledger("j1"), CATALOG,
        status="succeeded", final="merged", wall_s=1.0,
    ).to_dict()  # fmt: skip


@pytest.fixture
def store() -> MemoryJobStore:
    store = MemoryJobStore()
    store.create_job(job_spec(2), ["a", "b"])
    return store


def test_the_phase_says_the_aggregation_runs_once_every_node_ended(store: MemoryJobStore) -> None:
    handle = SwarmHandle("j1", store, CATALOG)
    assert handle.progress().phase == "nodes" and not handle.done()
    store.mark_running("j1", "n00", KIMI.name)
    store.finish_node("j1", ok("n00"))
    assert handle.progress().phase == "nodes"
    store.finish_node("j1", ok("n01"))
    progress = handle.progress()
    assert (progress.nodes_done, progress.nodes_total, progress.phase) == (2, 2, "aggregating")
    assert (progress.done, progress.total, progress.pending) == (2, 3, 0)  # the aggregation left
    assert not progress.finished and not handle.done() and handle.report() is None
    store.save_report("j1", written_report(store))
    progress = handle.progress()
    assert (progress.phase, progress.done, progress.total) == ("done", 3, 3) and handle.done()


def test_progress_counts_what_the_gateway_billed_so_far(store: MemoryJobStore) -> None:
    handle = SwarmHandle("j1", store, CATALOG)
    assert handle.progress().cost_usd == 0
    bill(store, "j1", "c1")
    bill(store, "j1", "c2")
    bill(store, "j1", "c2")  # the same response twice counts once
    assert handle.progress().cost_usd == pytest.approx(2 * cost_usd(KIMI, USAGE))
    assert SwarmHandle("j1", store).progress().cost_usd is None  # no catalog, no prices


def test_wait_and_report_give_the_typed_report_whose_dict_is_the_stored_one(
    store: MemoryJobStore,
) -> None:
    for node_id in ("n00", "n01"):
        store.finish_node("j1", ok(node_id))
    bill(store, "j1", "c1")
    written = written_report(store)
    store.save_report("j1", written)
    handle = SwarmHandle("j1", store, CATALOG)
    report = handle.wait(timeout=5)
    assert isinstance(report, Report) and report == handle.report()
    assert (report.status, report.final, report.succeeded) == ("succeeded", "merged", 2)
    assert [node.node_id for node in report.nodes] == ["n00", "n01"]
    assert report.models[KIMI.name].calls == 1
    assert report.to_dict() == written


def test_wait_times_out_with_the_job_id(store: MemoryJobStore) -> None:
    with pytest.raises(JobTimeoutError, match="j1"):
        SwarmHandle("j1", store, CATALOG).wait(timeout=0.05)


def test_the_async_wait_leaves_the_loop_running_until_the_report(store: MemoryJobStore) -> None:
    async def scenario() -> tuple[Report, int]:
        handle = AsyncSwarmHandle(SwarmHandle("j1", store, CATALOG), poll_s=0.01)
        waiting = asyncio.create_task(handle.wait(timeout=60))
        ticks = 0
        while ticks < 5:  # other coroutines run while the wait polls
            await asyncio.sleep(0.01)
            ticks += 1
        assert not waiting.done()
        store.save_report("j1", written_report(store))
        return await waiting, ticks

    report, _ = asyncio.run(scenario())
    assert report.final == "merged"


def test_the_async_wait_times_out(store: MemoryJobStore) -> None:
    handle = AsyncSwarmHandle(SwarmHandle("j1", store, CATALOG), poll_s=0.01)
    with pytest.raises(JobTimeoutError, match="j1"):
        asyncio.run(handle.wait(timeout=0.05))
