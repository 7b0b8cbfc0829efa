"""The cache warm-up across worker processes: two `celery -A workers worker` processes
follow one leader through the job store's Redis, so a 30-input job's shared context is
billed cached on every node but the first (the simulator caches as providers do)."""

from __future__ import annotations

import pytest
from stack import Stack, Worker, stack_fixture

from swarm.jobs.prompts import SUBAGENT_ROLE, shared_prefix
from swarm.sim.tokenizer import count_messages

pytestmark = pytest.mark.integration

NODES = 30
MODEL = "kimi-k2.5"
INSTRUCTION = "Review this pull request against the repository's conventions."
CONTEXT = "\n".join(
    f"Convention {i}: functions stay small and typed; module {i} owns one concept."
    for i in range(150)
)  # about 3,000 tokens
WAIT_S = 120.0
"""A generous bound for the report (never a timing assertion)."""

stack = stack_fixture(["--latency-ms", "2000", "--prompt-cache"], Worker("w1"), Worker("w2"))


def test_workers_share_one_leader_through_redis(stack: Stack) -> None:
    inputs = [f"PR #{i}: a diff of a few lines." for i in range(NODES)]
    with stack.client() as client:
        handle = client.submit(inputs, INSTRUCTION, model=MODEL, context=CONTEXT)
        report = handle.wait(timeout=WAIT_S).to_dict()
    assert report["status"] == "succeeded"
    cacheable = (NODES - 1) * count_messages([shared_prefix(SUBAGENT_ROLE, INSTRUCTION, CONTEXT)])
    cached = sum(node["usage"]["cached_tokens"] for node in report["nodes"])
    assert cached >= 0.9 * cacheable
    assert {node["model"] for node in report["nodes"]} == {MODEL}
    assert report["usage"]["cached_tokens"] == stack.stats()["cached_tokens"]
    # one leader for both processes (a gate per process would let one lead in each)
    assert sum(1 for node in report["nodes"] if not node["usage"]["cached_tokens"]) == 1
