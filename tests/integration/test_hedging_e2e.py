"""Hedged calls against the simulator, through Redis and a real worker process.

``[[sim:straggle_ms=N]]`` makes the first request with a given body take N ms and its
repeats (the hedge) the usual latency, or the ``latency_ms`` marker's; the simulator's
``cancelled`` counts requests whose client went away before the answer.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import procs
import pytest
from stack import Stack, Worker, stack_fixture

from swarm.records import InputItem

pytestmark = pytest.mark.integration

UNIT = Path(__file__).resolve().parents[1] / "unit"
sys.path[:0] = [str(UNIT)]  # the unit tests' toolset (agent_tools), for the producer's check
HEDGE_ENV = {
    "SWARM_HEDGE_AFTER_S": "2.0",
    "SWARM_HEDGE_MAX_RATIO": "0.2",
    "PYTHONPATH": str(UNIT),  # ... and for the worker's agent nodes
}
"""Hedge after 2.0 s (40 times the usual 50 ms, so a loaded CI machine does not hedge a
normal node); at most 20% of a job's nodes (10 nodes: 2
hedges; 1 node: 1)."""
HEDGED_QUEUE = "llm.kimi-k2.5"
PLAIN_QUEUE = "llm.gemini-2.5-flash"


stack = stack_fixture(["--latency-ms", "50"], Worker("hedge", HEDGED_QUEUE, env=HEDGE_ENV))


def settled(stack: Stack, timeout_s: float = 30.0) -> dict[str, int]:
    """The simulator's counters once no request is in flight any more."""
    deadline = time.monotonic() + timeout_s
    while (stats := stack.stats())["inflight"] and time.monotonic() < deadline:
        time.sleep(0.05)
    return stats


def assert_ledger_is_what_the_gateway_served(stack: Stack, job_id: str) -> None:
    stats = settled(stack)
    ledger = stack.client().store.ledger(job_id)
    assert sum(line.calls for line in ledger.values()) == stats["completed"]
    assert sum(line.usage.prompt_tokens for line in ledger.values()) == stats["prompt_tokens"]
    completion = sum(line.usage.completion_tokens for line in ledger.values())
    assert completion == stats["completion_tokens"]


def test_slow_first_answers_lose_to_hedges_within_the_jobs_cap(stack: Stack) -> None:
    # Five stragglers (first answer after 6 s, a repeat after 50 ms) among ten nodes; the
    # cap (20% of 10) allows two hedges: two stragglers are rescued, three wait.
    stack.reset_stats()
    items = [
        InputItem(ref=f"d{i}", text=f"diff {i}" + (" [[sim:straggle_ms=6000]]" if i < 5 else ""))
        for i in range(10)
    ]
    handle = stack.client().submit(
        items, "Review", aggregate_instruction="Merge. [[sim:latency_ms=10]]"
    )
    report = handle.wait(timeout=120).to_dict()

    assert report["status"] == "succeeded"
    assert (report["hedges_sent"], report["hedges_won"]) == (2, 2)
    stats = settled(stack)
    # 10 nodes + 2 hedges + the aggregation reached the gateway; the 2 rescued originals
    # were cancelled (their client went away), so they were neither completed nor billed.
    assert (stats["requests"], stats["cancelled"], stats["completed"]) == (13, 2, 11)
    assert_ledger_is_what_the_gateway_served(stack, handle.id)


def test_a_hedge_is_cancelled_when_the_first_answer_wins(stack: Stack) -> None:
    # The original answers after 3.5 s; its hedge (sent at 2.0 s) would take 20 s.
    stack.reset_stats()
    item = InputItem(ref="d", text="diff [[sim:straggle_ms=3500]] [[sim:latency_ms=20000]]")
    handle = stack.client().submit([item], "Review", aggregate_instruction="Merge.")
    report = handle.wait(timeout=60).to_dict()

    assert report["status"] == "succeeded"
    assert (report["hedges_sent"], report["hedges_won"]) == (1, 0)
    stats = settled(stack, timeout_s=10)  # the hedge is gone long before its 20 s
    assert stats["inflight"] == 0
    assert (stats["requests"], stats["cancelled"], stats["completed"]) == (3, 1, 2)
    assert_ledger_is_what_the_gateway_served(stack, handle.id)


def test_an_agent_step_is_hedged_like_any_call(stack: Stack) -> None:
    # One agent node of two steps; each step's first request straggles 4 s (the marker
    # is in the user message both steps carry). The cap allows one hedge for a 1-node job:
    # step 0 is rescued by it, step 1 waits for its straggler. The tool runs once.
    stack.reset_stats()
    item = InputItem(ref="a", text="look [[sim:tool_steps=1]] [[sim:straggle_ms=4000]]")
    handle = stack.client().submit(
        [item], "Look it up", tools="agent_tools", aggregate_instruction="Merge."
    )
    report = handle.wait(timeout=90).to_dict()

    assert report["status"] == "succeeded", report.get("error")
    node = report["nodes"][0]
    assert (node["steps"], node["tool_calls"], node["tool_errors"]) == (2, 1, 0)
    assert (report["hedges_sent"], report["hedges_won"]) == (1, 1)
    transcript = stack.client().store.transcript(handle.id, node["node_id"])
    assert transcript is not None
    assert [m["role"] for m in transcript.messages].count("tool") == 1
    stats = settled(stack)
    # 2 steps + 1 hedge + the aggregation reached the gateway; the rescued original was
    # cancelled, so the ledger holds the 3 answers the gateway completed.
    assert (stats["requests"], stats["cancelled"], stats["completed"]) == (4, 1, 3)
    assert_ledger_is_what_the_gateway_served(stack, handle.id)


def test_hedging_is_off_by_default(stack: Stack, tmp_logs: Path) -> None:
    # A worker without SWARM_HEDGE_* on its own queue: a straggler just waits.
    worker = procs.start_celery_worker(stack.env, PLAIN_QUEUE, 4, "plain@%h", tmp_logs)
    try:
        stack.reset_stats()
        item = InputItem(ref="d", text="x [[sim:straggle_ms=1500]]")
        client = stack.client()
        handle = client.submit([item], "Extract", model="gemini-2.5-flash")
        report = handle.wait(timeout=60).to_dict()
    finally:
        worker.terminate(10)
    assert report["status"] == "succeeded"
    assert report["hedges_sent"] == 0
    assert stack.stats()["cancelled"] == 0
