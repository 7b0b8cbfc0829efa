"""Answers of a hosted-like gateway are never cut silently, through Redis and a real worker.

The simulator generates like a hosted gateway (0.9 s to the first token, then 160 tokens a
second; ``[[sim:answer_tokens=N]]`` sets an answer's length, cut at the request's
max_tokens with ``finish_reason: length``). Job A teaches the deployment short answers
(20 tokens, about 1 s each); job B on the same model then asks for 1,500-token answers
(about 10 s, well inside the 45 s node timeout). Each of job B's requests is sent the
catalog's max_tokens and no answer is cut: a hosted backend is never paced. (A pace fitted
without a fixed term charged the first token's 0.9 s to 20 tokens, 22 tokens a second,
shared through Redis: job B was sent max_tokens of a few hundred and every answer came back
cut, reported as succeeded.)
"""

from __future__ import annotations

import pytest
from stack import Stack, Worker, stack_fixture

from swarm.catalog import load_catalog
from swarm.records import InputItem

pytestmark = pytest.mark.integration

MAX_TOKENS = str(load_catalog().route("default").max_tokens)
"""The packaged catalog's max_tokens of the routed model (kimi-k2.5's 16,384)."""
WAIT_S = 180.0
"""A generous deadline for a job (never a timing bound)."""

stack = stack_fixture(
    ["--ttft-ms", "900", "--tokens-per-s", "160"],
    Worker("w1", None, c=32),
    env={"SWARM_NODE_TIMEOUT_S": "45"},
)


def inputs(n: int, tokens: int) -> list[InputItem]:
    return [
        InputItem(ref=f"d{i}", text=f"diff {i} [[sim:answer_tokens={tokens}]]") for i in range(n)
    ]


def test_long_answers_after_short_ones_are_sent_as_asked_and_not_cut(stack: Stack) -> None:
    client = stack.client()
    short = client.submit(inputs(60, 20), "Say it in a word").wait(timeout=WAIT_S).to_dict()
    assert short["succeeded"] == 60 and short["truncated"] == 0
    stack.reset_stats()
    report = client.submit(inputs(30, 1500), "Review this diff").wait(timeout=WAIT_S).to_dict()
    stats = stack.stats()
    assert report["succeeded"] == 30, report["failures_by_kind"]
    assert stats["max_tokens_seen"] == {MAX_TOKENS: stats["requests"]}, stats["max_tokens_seen"]
    assert report["truncated"] == 0 and report["capped"] == 0
    assert all(node["max_tokens_sent"] is None for node in report["nodes"])
    assert all(node["finish_reason"] == "stop" for node in report["nodes"])
    assert stats["truncated"] == 0
