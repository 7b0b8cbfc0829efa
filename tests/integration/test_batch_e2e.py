"""Jobs with a deadline through the simulator's Batch API, end to end: real redis-server,
`celery -A workers worker` processes, the simulator over HTTP (swarm.batch)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest
from stack import Stack, Worker, stack_fixture

from swarm.cost.pricing import cost_usd
from swarm.records import InputItem, Usage

pytestmark = pytest.mark.integration

MODEL = "kimi-k2.5"
WAIT_S = 120.0
"""A generous bound for a job's report (never a timing assertion)."""

SIM_ARGS = ["--batch-processing-s", "2", "--batch-one-model", "--batch-refused-field",
            "temperature", "--batch-refused-field", "top_p", "--seed", "5"]  # fmt: skip
stack = stack_fixture(
    SIM_ARGS,
    Worker("w1"),
    Worker("w2", "llm.kimi-k2.5"),
)


def inputs(n: int, tag: str) -> list[InputItem]:
    return [InputItem(ref=f"{tag}-{i}.txt", text=f"document {tag} {i}: x = {i}") for i in range(n)]


def batch_line(report: dict[str, Any]) -> dict[str, Any]:
    line: dict[str, Any] = report["models"][MODEL]
    return line


def test_deadline_job_runs_through_one_batch_at_half_price(stack: Stack) -> None:
    stack.reset_stats()
    client = stack.client()
    report = (
        client.submit(inputs(60, "a"), "Extract x", deadline_s=600).wait(timeout=WAIT_S).to_dict()
    )
    assert report["status"] == "succeeded", report.get("error")
    assert {node["via"] for node in report["nodes"]} == {"batch"}
    stats = stack.stats()
    batch = stats["batch"]
    assert (batch["batches_created"], batch["lines_billed"], batch["lines_failed"]) == (1, 60, 0)
    line = batch_line(report)
    assert line["batch_calls"] == 60
    assert line["calls"] == 61 == batch["lines_billed"] + stats["completed"]  # + aggregation
    # Ledger tokens == the simulator's billed lines + its live calls (the aggregation).
    assert line["prompt_tokens"] == batch["prompt_tokens"] + stats["prompt_tokens"]
    assert line["completion_tokens"] == batch["completion_tokens"] + stats["completion_tokens"]
    spec = client.catalog.model(MODEL)
    lines_live_price = cost_usd(spec, tokens(batch))
    aggregation = cost_usd(spec, tokens(stats))
    assert line["cost_usd"] == pytest.approx(aggregation + 0.5 * lines_live_price, rel=1e-4)
    assert line["saved_usd"] == pytest.approx(0.5 * lines_live_price, rel=1e-4)

    stack.reset_stats()
    live = client.submit(inputs(60, "a"), "Extract x").wait(timeout=WAIT_S).to_dict()
    assert live["status"] == "succeeded", live.get("error")
    assert {node["via"] for node in live["nodes"]} == {"live"}
    live_stats = stack.stats()
    assert live_stats["batch"]["batches_created"] == 0
    assert batch_line(live)["batch_calls"] == 0
    # Side by side: the same node calls (the simulator answers deterministically) cost
    # half as much through the batch as live.
    node_usage = sum((Usage(**node["usage"]) for node in live["nodes"]), Usage())
    assert node_usage == tokens(batch)
    nodes_live = cost_usd(spec, node_usage)
    nodes_batch = line["cost_usd"] - aggregation
    assert nodes_batch == pytest.approx(0.5 * nodes_live, rel=1e-3)


def tokens(counts: dict[str, Any]) -> Usage:
    """The usage a /stats section counts (the simulator reports no cached tokens here)."""
    return Usage(prompt_tokens=counts["prompt_tokens"],
                 completion_tokens=counts["completion_tokens"])  # fmt: skip


def test_without_deadline_nothing_goes_to_batch(stack: Stack) -> None:
    stack.reset_stats()
    report = stack.client().submit(inputs(5, "b"), "Extract x").wait(timeout=WAIT_S).to_dict()
    assert report["status"] == "succeeded"
    assert stack.stats()["batch"]["files_uploaded"] == 0
    assert "batch_calls" not in report["models"][MODEL] or not batch_line(report)["batch_calls"]


def test_deadline_shorter_than_the_batch_runs_pending_nodes_live(stack: Stack) -> None:
    """The simulator's batch takes 2 s; a 2.5 s deadline keeps 2 s for live calls, so the
    batch is cancelled half a second in and the nodes it had not answered run live."""
    stack.reset_stats()
    handle = stack.client().submit(inputs(40, "c"), "Extract x", deadline_s=2.5)
    report = handle.wait(timeout=WAIT_S).to_dict()
    assert report["status"] == "succeeded", report.get("error")
    stats = stack.stats()
    vias = [node["via"] for node in report["nodes"]]
    assert "live" in vias
    line = batch_line(report)
    # Each node billed once: batch lines + live node calls == nodes; + aggregation.
    assert line["calls"] == 41 == stats["batch"]["lines_billed"] + stats["completed"]
    assert line["batch_calls"] == stats["batch"]["lines_billed"] == vias.count("batch")


def run_cli(args: list[str], stack: Stack, stdin: str | None = None) -> Any:
    return subprocess.run(
        [sys.executable, "-m", "swarm.cli.main", *args],
        env={**os.environ, **stack.env},
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cli_deadline_status_shows_the_batch_then_the_report(stack: Stack) -> None:
    stack.reset_stats()
    lines = "".join(f"line {i}\n" for i in range(10))
    started = run_cli(["run", "-", "--deadline", "30m", "--no-wait"], stack, stdin=lines)
    assert started.returncode == 0, started.stderr
    job_id = started.stdout.strip().split()[-1]
    running = run_cli(["status", job_id, "--json"], stack)
    assert running.returncode in (0, 1), running.stderr
    shown = json.loads(running.stdout)
    if shown["status"] == "running":  # the 2 s batch may already be over
        assert shown["deadline_at"] is not None and len(shown["batches"]) == 1
    report = stack.client().attach(job_id).wait(timeout=WAIT_S).to_dict()
    assert report["models"][MODEL]["batch_calls"] == 10
    ended = json.loads(run_cli(["status", job_id, "--json"], stack).stdout)
    assert ended["status"] == "succeeded" and {n["via"] for n in ended["nodes"]} == {"batch"}
