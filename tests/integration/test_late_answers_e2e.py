"""Answers that come after their call timed out, through Redis and real worker processes.

The simulator finishes abandoned requests and bills them (``--finish-abandoned``, as
llama.cpp's server does), and ``[[sim:straggle_ms=N]]`` makes each node's first request
take N ms, past the workers' 2 s node timeout, and its retry the usual 20 ms. A worker
of a local backend reads requests past their deadline (swarm.calls.local.overtime) and
bills the late answers: the ledger (and the report, through ``late_calls`` once it was
written) equals what the simulator completed. A worker with SWARM_ABANDONED_GRACE_S=0
closes them at the deadline: the simulator still bills them, the ledger does not.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from stack import Stack, Worker, stack_fixture

from swarm.records import InputItem, Usage

pytestmark = pytest.mark.integration

FAST = {"SWARM_NODE_TIMEOUT_S": "2", "SWARM_BACKOFF_MAX_S": "0.5", "SWARM_OUTAGE_MIN_CALLS": "1000"}
"""Short timeouts; the outage rule off (every node times out at once here, which it would
wait out as a gateway outage without spending the attempt this test counts)."""
"""A 2 s node timeout (100 times the usual 20 ms answer) and short backoffs."""
OVERTIME_QUEUE, CLOSING_QUEUE = "llm.kimi-k2.5", "llm.gemini-2.5-flash"
NODES = 4
WAIT_S = 60.0
"""A generous deadline for a condition (never a timing bound)."""

stack = stack_fixture(
    ["--latency-ms", "20", "--finish-abandoned"],
    Worker("overtime", OVERTIME_QUEUE, env={**FAST, "SWARM_ABANDONED_GRACE_S": "30"}),
    Worker("closing", CLOSING_QUEUE, env={**FAST, "SWARM_ABANDONED_GRACE_S": "0"}),
    local=True,  # requests read past their deadline: a local backend's overtime
)


def stragglers() -> list[InputItem]:
    """Nodes whose first request takes 5 s: past the 2 s timeout, within the grace."""
    return [InputItem(ref=f"d{i}", text=f"diff {i} [[sim:straggle_ms=5000]]") for i in range(NODES)]


def ledger_calls(stack: Stack, job_id: str) -> int:
    return sum(line.calls for line in stack.client().store.ledger(job_id).values())


def settled(stack: Stack, job_id: str, billed: int) -> dict[str, Any]:
    """The simulator's counters once nothing is in flight and the ledger counts ``billed``
    calls (late answers are billed as they arrive: polled)."""
    deadline = time.monotonic() + WAIT_S
    while (stats := stack.stats())["inflight"] or ledger_calls(stack, job_id) < billed:
        assert time.monotonic() < deadline, (stats, ledger_calls(stack, job_id))
        time.sleep(0.1)
    return stats


def usage_of(counts: dict[str, Any]) -> tuple[int, int]:
    return counts["prompt_tokens"], counts["completion_tokens"]


def test_answers_after_the_timeout_are_billed_and_the_report_counts_them(stack: Stack) -> None:
    stack.reset_stats()
    handle = stack.client().submit(
        stragglers(), "Review", aggregate_instruction="Merge. [[sim:latency_ms=10]]"
    )
    report = handle.wait(timeout=120).to_dict()
    assert report["status"] == "succeeded"
    assert [node["attempts"] for node in report["nodes"]] == [2] * NODES  # each timed out once

    served = 2 * NODES + 1  # the late first answers, the retries, the aggregation
    stats = settled(stack, handle.id, served)
    assert (stats["completed"], stats["abandoned"]) == (served, 0)  # every answer was read
    ledger = stack.client().store.ledger(handle.id)
    assert sum(line.calls for line in ledger.values()) == served
    billed = sum((line.usage for line in ledger.values()), Usage())
    assert (billed.prompt_tokens, billed.completion_tokens) == usage_of(stats)
    final = r.to_dict() if (r := handle.report()) else None
    assert final is not None
    assert usage_of(final["usage"]) == usage_of(stats)
    assert sum(model["calls"] for model in final["models"].values()) == served
    written = stack.client().store.report(handle.id)
    assert written is not None
    written_calls = sum(model["calls"] for model in written["models"].values())
    assert final.get("late_calls", 0) == served - written_calls  # billed after the report


def test_without_grace_the_gateway_bills_what_the_ledger_never_sees(stack: Stack) -> None:
    # The control: the same stragglers on a worker that closes requests at the deadline.
    stack.reset_stats()
    handle = stack.client().submit(
        stragglers(), "Review", model="gemini-2.5-flash",
        aggregate_instruction="Merge. [[sim:latency_ms=10]]",
    )  # fmt: skip
    report = handle.wait(timeout=120).to_dict()
    assert report["status"] == "succeeded"

    stats = settled(stack, handle.id, NODES + 1)
    assert stats["abandoned"] == NODES  # computed and billed after the client left
    assert stats["completed"] == 2 * NODES + 1
    assert ledger_calls(stack, handle.id) == NODES + 1
