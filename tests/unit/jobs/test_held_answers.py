"""A plain node's answer is recorded with its envelope in one write (JobStore.finish_billed_node)
when its claim is a lease: billed once, stored for a rerun, never lost on the way."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from doubles import MockGateway, completion

from swarm.calls.context_window import LearnedWindows
from swarm.calls.runtime import Runtime
from swarm.catalog import load_catalog
from swarm.jobs.subagent import run_node
from swarm.records import JobSpec
from swarm.settings import Settings
from swarm.store import MemoryJobStore
from swarm.store.heartbeat import LeaseKeeper


class Writes(MemoryJobStore):
    """Logs the billing writes in order."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[str] = []

    def record_call(self, job_id: str, call: Any, fence: Any = None) -> bool:
        self.log.append("record")
        return super().record_call(job_id, call, fence)

    def finish_billed_node(self, job_id: str, envelope: Any, fence: Any, held: Any) -> bool:
        self.log.append("finish+record")
        return super().finish_billed_node(job_id, envelope, fence, held)

    def finish_node(self, job_id: str, envelope: Any, fence: Any = None) -> bool:
        self.log.append("finish")
        return super().finish_node(job_id, envelope, fence)


class BrokenWindows(LearnedWindows):
    """Fails between the answer and the envelope (after the answer arrived)."""

    def calibrate(self, model: str, estimated: int, actual: int) -> None:
        raise RuntimeError("calibration broke")


@pytest.fixture
def keeper_store() -> Iterator[tuple[Writes, LeaseKeeper]]:
    store = Writes()
    keeper = LeaseKeeper(store, lease_s=30)
    yield store, keeper
    keeper.stop()


def new_job(store: Writes, **fields: Any) -> JobSpec:
    spec = JobSpec(
        job_id="j1",
        instruction="find bugs",
        aggregate_instruction="merge",
        model="kimi-k2.5",
        aggregate_model="kimi-k2.5",
        node_ids=("n0",),
        input_refs=("f0.py",),
        submitted_at=time.time(),
        **fields,
    )
    store.create_job(spec, ["input 0"])
    return spec


def runtime(settings: Settings, store: Writes, keeper: LeaseKeeper, **extra: Any) -> Runtime:
    gw = MockGateway(lambda body, n: completion(f"answer {n}", prompt=9, completion_tokens=4))
    return Runtime(settings, load_catalog(), store, gw.client(), leases=keeper, **extra)


def test_the_answer_is_recorded_once_with_the_envelope(
    fast_settings: Settings, keeper_store: tuple[Writes, LeaseKeeper]
) -> None:
    store, keeper = keeper_store
    rt = runtime(fast_settings, store, keeper)
    spec = new_job(store)
    envelope = run_node(rt, spec.job_id, "n0")
    assert envelope.ok and envelope.content == "answer 1"
    assert store.log[0] == "finish+record"  # nothing written on arrival: one write at the end
    line = store.ledger(spec.job_id)["kimi-k2.5"]
    assert (line.calls, line.usage.prompt_tokens, line.usage.completion_tokens) == (1, 9, 4)
    assert store.envelope(spec.job_id, "n0") == envelope
    assert store.claim(spec.job_id, "n0", "next run", 5)  # the claim ended with the answer
    assert keeper.held() == []


def test_an_error_after_the_answer_records_it_at_once(
    fast_settings: Settings, keeper_store: tuple[Writes, LeaseKeeper]
) -> None:
    store, keeper = keeper_store
    rt = runtime(fast_settings, store, keeper, windows=BrokenWindows())
    spec = new_job(store)
    with pytest.raises(RuntimeError, match="calibration broke"):
        run_node(rt, spec.job_id, "n0")
    assert store.log == ["record"]
    assert store.ledger(spec.job_id)["kimi-k2.5"].calls == 1
    again = runtime(fast_settings, store, keeper)  # the rerun reuses the stored answer
    assert run_node(again, spec.job_id, "n0").content == "answer 1"
    assert store.ledger(spec.job_id)["kimi-k2.5"].calls == 1


@pytest.mark.parametrize(
    "fields",
    [{"budget_usd": 5.0}, {"output_schema": {"type": "object"}}],
    ids=["budgeted", "json"],
)
def test_budgeted_and_json_nodes_record_on_arrival(
    fast_settings: Settings, keeper_store: tuple[Writes, LeaseKeeper], fields: dict[str, Any]
) -> None:
    store, keeper = keeper_store
    rt = runtime(fast_settings, store, keeper)
    spec = new_job(store, **fields)
    run_node(rt, spec.job_id, "n0")
    assert store.log[0] == "record" and store.log[-1] == "finish"
    assert "finish+record" not in store.log


def test_without_a_lease_the_answer_is_recorded_on_arrival(fast_settings: Settings) -> None:
    store = Writes()
    gw = MockGateway(lambda body, n: completion("ok"))
    rt = Runtime(fast_settings, load_catalog(), store, gw.client())
    spec = new_job(store)
    assert run_node(rt, spec.job_id, "n0").ok
    assert store.log == ["record", "finish"]
