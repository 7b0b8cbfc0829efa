"""Poll steps of batch files against the simulator's Batch API over HTTP (swarm.batch.poll),
run in this process on an in-memory job store: creation, take-over, faults."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from swarm.batch.gateway import BatchGateway
from swarm.batch.lines import file_lines
from swarm.batch.plan import plan_batches
from swarm.batch.poll import PollOutcome, poll_file
from swarm.calls.runtime import Runtime
from swarm.catalog import load_catalog
from swarm.records import ErrorKind, JobSpec
from swarm.settings import Settings
from swarm.sim import RunningSim, SimConfig, start_in_thread
from swarm.sim.batch_config import BatchSimConfig
from swarm.store import MemoryJobStore
from swarm.store.batches import batch_store

pytestmark = pytest.mark.integration

MODEL = "kimi-k2.5"
WAIT_S = 60.0
"""A generous bound for a file's steps to end (never a timing assertion)."""


def running(batch: BatchSimConfig) -> Iterator[tuple[RunningSim, Runtime]]:
    with start_in_thread(SimConfig(batch=batch)) as sim:
        client = openai.OpenAI(base_url=sim.base_url, api_key="k", max_retries=0, timeout=30)
        settings = Settings(max_attempts=3, backoff_max_s=0.01, node_timeout_s=10)
        yield sim, Runtime(settings, load_catalog(), MemoryJobStore(), client)


def new_job(rt: Runtime, n: int, deadline_s: float = 600.0, job_id: str = "j1") -> JobSpec:
    now = time.time()
    spec = JobSpec(
        job_id=job_id, instruction="extract x", aggregate_instruction="merge", model=MODEL,
        aggregate_model=MODEL, node_ids=tuple(f"n{i:03d}" for i in range(n)),
        input_refs=tuple(f"doc{i}" for i in range(n)), submitted_at=now,
        deadline_at=now + deadline_s,
    )  # fmt: skip
    rt.store.create_job(spec, [f"document {i}: x = {i}" for i in range(n)])
    planned = plan_batches(spec, rt.catalog, spec.node_ids, {}, now)
    assert len(planned.files) == 1 and not planned.live
    batch_store(rt.store).plan(job_id, planned.files)
    return spec


def until_done(rt: Runtime, job_id: str) -> PollOutcome:
    """Run the file's steps as the task would, each after its countdown."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        outcome = poll_file(rt, job_id, 0)
        if outcome.done:
            return outcome
        time.sleep(min(outcome.countdown_s, 0.2))
    raise AssertionError(f"file 0 of {job_id} did not end within {WAIT_S} s")


def billed_once(rt: Runtime, sim: RunningSim, spec: JobSpec) -> dict[str, Any]:
    """Every node has one envelope, and the ledger == what the simulator billed."""
    stats = sim.stats()
    ledger = rt.store.ledger(spec.job_id)
    batch_line = ledger.get(f"{MODEL}|batch")
    live_line = ledger.get(MODEL)
    assert (batch_line.calls if batch_line else 0) == stats["batch"]["lines_billed"]
    assert (live_line.calls if live_line else 0) == stats["completed"]
    assert len(rt.store.envelopes(spec.job_id)) == len(spec.node_ids)
    return stats


def test_a_batch_created_by_a_run_that_died_is_found_not_created_again() -> None:
    for sim, rt in running(BatchSimConfig(processing_s=0.5)):
        spec = new_job(rt, 20)
        # The dead run: it created the batch and died before storing its id.
        lines = file_lines(rt, spec, spec.node_ids, {n: rt.store.input_text("j1", n)
                                                       for n in spec.node_ids})  # fmt: skip
        BatchGateway(rt.client).create("j1", 0, lines.jsonl())
        outcome = until_done(rt, "j1")
        assert outcome.state.status == "completed"
        assert sim.stats()["batch"]["batches_created"] == 1
        envelopes = rt.store.envelopes("j1")
        assert {env.via for env in envelopes} == {"batch"} and all(env.ok for env in envelopes)
        billed_once(rt, sim, spec)


def test_a_second_run_of_the_same_step_creates_nothing() -> None:
    for sim, rt in running(BatchSimConfig(processing_s=1.0)):
        new_job(rt, 5)
        first = poll_file(rt, "j1", 0)
        assert not first.done and first.state.batch_id is not None
        # A copy of the same step (a redelivered countdown message) finds the stored id.
        again = poll_file(rt, "j1", 0)
        assert again.state.batch_id == first.state.batch_id
        assert sim.stats()["batch"]["batches_created"] == 1


def test_failed_lines_run_live_and_every_node_is_billed_once() -> None:
    for sim, rt in running(BatchSimConfig(processing_s=0.2, failed_rate=0.1)):
        spec = new_job(rt, 100)
        until_done(rt, "j1")
        stats = billed_once(rt, sim, spec)
        envelopes = rt.store.envelopes("j1")
        assert all(env.ok for env in envelopes)
        live = [env for env in envelopes if env.via == "live"]
        assert len(live) == stats["batch"]["lines_failed"] > 0
        assert stats["completed"] == len(live)


def test_an_expired_batch_bills_what_it_did_and_the_rest_runs_live() -> None:
    for sim, rt in running(BatchSimConfig(processing_s=30.0, expire_s=1.0)):
        spec = new_job(rt, 60)
        outcome = until_done(rt, "j1")
        assert outcome.state.status == "expired"
        stats = billed_once(rt, sim, spec)
        envelopes = rt.store.envelopes("j1")
        assert all(env.ok for env in envelopes)
        vias = [env.via for env in envelopes]
        assert vias.count("batch") == stats["batch"]["lines_billed"] > 0
        assert vias.count("live") == stats["completed"] > 0


def test_a_gateway_without_batch_runs_the_nodes_live() -> None:
    for sim, rt in running(BatchSimConfig(enabled=False)):
        spec = new_job(rt, 5)
        outcome = until_done(rt, "j1")
        assert outcome.state.status == "live" and outcome.state.error is not None
        assert "404" in outcome.state.error
        billed_once(rt, sim, spec)
        assert {env.via for env in rt.store.envelopes("j1")} == {"live"}


def test_a_batch_refused_at_validation_runs_the_nodes_live() -> None:
    for sim, rt in running(BatchSimConfig(max_lines=3)):
        spec = new_job(rt, 5)
        outcome = until_done(rt, "j1")
        assert outcome.state.status == "failed"
        assert outcome.state.error is not None and "too_many_lines" in outcome.state.error
        billed_once(rt, sim, spec)


def test_a_cancelled_job_cancels_its_batch() -> None:
    for sim, rt in running(BatchSimConfig(processing_s=30.0)):
        spec = new_job(rt, 5)
        assert poll_file(rt, "j1", 0).state.batch_id is not None
        rt.store.cancel("j1")
        outcome = poll_file(rt, "j1", 0)
        assert outcome.done and outcome.state.status == "cancelled"
        assert sim.stats()["batch"]["batches_cancelled"] == 1
        kinds = {env.error_kind for env in rt.store.envelopes("j1")}
        assert kinds == {ErrorKind.CANCELLED}
        billed_once(rt, sim, spec)


def test_a_batch_still_cancelling_is_settled_later_and_its_billing_recorded() -> None:
    for sim, rt in running(BatchSimConfig(processing_s=20.0, cancel_s=1.0)):
        spec = new_job(rt, 100, deadline_s=3.0)  # live reserve 2 s: the switch after 1 s
        outcome = until_done(rt, "j1")
        assert outcome.settle_later and outcome.state.status == "cancelling"
        assert all(env.ok for env in rt.store.envelopes("j1"))  # ended live by the deadline
        deadline = time.monotonic() + WAIT_S
        while not (settled := poll_file(rt, "j1", 0, settle=True)).done:
            assert time.monotonic() < deadline, "the cancelled batch never ended"
            time.sleep(0.2)
        assert settled.state.status == "cancelled" and settled.state.ingested
        stats = billed_once(rt, sim, spec)  # the ledger == what the simulator billed
        assert stats["batch"]["lines_billed"] > 0  # lines done before the cancel took effect


def test_a_dead_run_s_batch_found_past_the_switch_is_cancelled_and_billed() -> None:
    for sim, rt in running(BatchSimConfig(processing_s=20.0)):
        spec = new_job(rt, 40, deadline_s=2.5)  # live reserve 2 s: the switch after 0.5 s
        texts = {n: rt.store.input_text("j1", n) for n in spec.node_ids}
        BatchGateway(rt.client).create("j1", 0, file_lines(rt, spec, spec.node_ids, texts).jsonl())
        time.sleep(max(spec.submitted_at + 0.6 - time.time(), 0.0))  # past the switch
        outcome = poll_file(rt, "j1", 0)
        assert outcome.done and outcome.state.status == "cancelled"
        stats = billed_once(rt, sim, spec)
        assert (stats["batch"]["batches_created"], stats["batch"]["batches_cancelled"]) == (1, 1)
        assert all(env.ok for env in rt.store.envelopes("j1"))
