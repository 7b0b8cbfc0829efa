"""The no-worker hint: every queue of the job without a consumer in one line, and the
Python API's wait says it too (logged, and in its JobTimeoutError)."""

from __future__ import annotations

import logging

import pytest
from doubles import job_spec

from swarm.catalog import load_catalog
from swarm.client import SwarmHandle
from swarm.client import handle as handle_module
from swarm.client.idle import idle_line, job_queues
from swarm.errors import JobTimeoutError
from swarm.store import MemoryJobStore

HINT = "no worker of the 1 running consumes llm.kimi-k2.5; start one: ... (still waiting)"
SAID = "no worker of the 1 running consumes llm.kimi-k2.5; start one: ..."


def test_the_nodes_stage_names_the_aggregations_queue_too() -> None:
    """Nodes on one model, the aggregation on another: a user told only of the nodes' queue
    would start that worker and then wait at the aggregation for the next hint."""
    spec = job_spec(2).model_copy(update={"model": "gemini-2.5-flash"})
    queues = job_queues(spec, load_catalog(), "nodes")
    assert queues == ["llm.gemini-2.5-flash", "llm.kimi-k2.5"]
    assert job_queues(spec, load_catalog(), "aggregate") == ["llm.kimi-k2.5"]
    assert idle_line(queues, set(), 1) == (
        "no worker of the 1 running consumes llm.gemini-2.5-flash, llm.kimi-k2.5; start one: "
        "celery -A workers worker -Q llm.gemini-2.5-flash,llm.kimi-k2.5 (still waiting)"
    )


def waiting_job() -> MemoryJobStore:
    store = MemoryJobStore()
    store.create_job(job_spec(2), ["a", "b"])
    return store


def test_a_timed_out_wait_carries_the_hint() -> None:
    asked: list[str] = []

    def check(job_id: str) -> str:
        asked.append(job_id)
        return HINT

    handle = SwarmHandle("j1", waiting_job(), load_catalog(), idle_check=check)
    with pytest.raises(JobTimeoutError) as raised:
        handle.wait(timeout=0.1)
    assert str(raised.value) == f"job j1 has no report after 0 s; {SAID}"
    assert asked == ["j1"]


def test_a_long_wait_logs_the_hint_once(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(handle_module, "IDLE_CHECK_S", 0.05)
    asked: list[str] = []

    def check(job_id: str) -> str:
        asked.append(job_id)
        return HINT

    handle = SwarmHandle("j1", waiting_job(), load_catalog(), idle_check=check)
    with (
        caplog.at_level(logging.WARNING, logger="swarm.client.handle"),
        pytest.raises(JobTimeoutError, match=r"llm\.kimi-k2\.5"),
    ):
        handle.wait(timeout=0.3)
    assert [r.getMessage() for r in caplog.records] == [f"swarm: job j1: {HINT}"]
    assert asked == ["j1"]  # asked once, not at every poll


def test_no_hint_while_a_node_runs() -> None:
    store = waiting_job()
    store.mark_running("j1", "n00", "kimi-k2.5")

    def check(job_id: str) -> str:
        raise AssertionError("the workers are not asked while a node runs")

    with pytest.raises(JobTimeoutError) as raised:
        SwarmHandle("j1", store, load_catalog(), idle_check=check).wait(timeout=0.1)
    assert str(raised.value) == "job j1 has no report after 0 s"
