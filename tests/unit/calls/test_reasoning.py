"""A thinking model's reasoning_content: read from the raw answer, kept apart from the
content, sent back in an agent's tool-call messages where the provider requires it; an
answer whose reasoning used the whole cap is an error of its own, asked again with a
larger cap (swarm.calls.reasoning)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import httpx2
import pytest
from doubles import MockGateway, completion, job_spec, tool_call_answer

from swarm.calls.gateway import answer_from_json
from swarm.calls.retry_policy import BadResponseError, classify
from swarm.calls.runtime import Runtime
from swarm.jobs.aggregation import run_aggregation
from swarm.jobs.subagent import call_node, run_node
from swarm.records import ErrorKind

MakeRuntime = Callable[..., tuple[Runtime, MockGateway]]
THOUGHT = "Let me think: the input has one bug."


def test_reasoning_content_is_read_apart_from_the_content() -> None:
    raw = json.loads(completion("the answer", reasoning=THOUGHT).content)
    answer = answer_from_json(raw)
    assert answer.content == "the answer" and answer.reasoning == THOUGHT


def test_empty_content_at_the_cap_is_an_error_of_its_own_kind() -> None:
    raw = json.loads(
        completion("", finish="length", completion_tokens=64, reasoning=THOUGHT).content
    )
    with pytest.raises(BadResponseError) as info:
        answer_from_json(raw)
    assert classify(info.value) is ErrorKind.REASONING_CUT
    assert info.value.usage is not None and info.value.usage.completion_tokens == 64
    assert "reasoning used all 64 completion tokens" in str(info.value)
    kept = answer_from_json(json.loads(completion("partial", finish="length").content))
    assert kept.content == "partial" and kept.finish_reason == "length"  # cut, not empty


def test_the_envelope_keeps_the_reasoning_and_the_aggregation_never_sees_it(
    make_runtime: MakeRuntime,
) -> None:
    rt, gw = make_runtime(lambda body, n: completion(f"result {n}", reasoning=THOUGHT))
    rt.store.create_job(job_spec(2), ["a", "b"])
    envs = [run_node(rt, "j1", n) for n in ("n00", "n01")]
    assert all(e.ok and e.reasoning == THOUGHT and THOUGHT not in e.content for e in envs)
    run_aggregation(rt, "j1")
    merge = gw.requests[-1]
    assert "result 1" in json.dumps(merge["messages"])
    assert THOUGHT not in json.dumps(merge["messages"])


def cut_then_answer(body: dict[str, Any], n: int) -> httpx2.Response:
    """A thinking model whose reasoning needs more than 16,384 tokens."""
    if body["max_tokens"] <= 16_384:
        return completion("", finish="length", completion_tokens=body["max_tokens"],
                          reasoning=THOUGHT)  # fmt: skip
    return completion("found it", completion_tokens=20_000, reasoning=THOUGHT)


def test_a_cut_answer_is_asked_again_with_a_larger_cap_and_says_so(
    make_runtime: MakeRuntime, caplog: pytest.LogCaptureFixture
) -> None:
    rt, gw = make_runtime(cut_then_answer)
    rt.store.create_job(job_spec(1), ["input"])
    with caplog.at_level(logging.INFO, logger="swarm.calls.reasoning"):
        env = run_node(rt, "j1", "n00")
    assert env.ok and env.content == "found it"
    assert [r["max_tokens"] for r in gw.requests] == [16_384, 32_768]  # up to max_output_tokens
    assert "asking again with max_tokens 32768" in caplog.text
    assert env.attempts == 2 and env.usage.completion_tokens == 16_384 + 20_000  # both billed
    assert rt.store.ledger("j1")["kimi-k2.5"].calls == 2


def test_a_cut_answer_at_the_models_limit_fails_with_a_clear_error(
    make_runtime: MakeRuntime, caplog: pytest.LogCaptureFixture
) -> None:
    def always_cut(body: dict[str, Any], n: int) -> httpx2.Response:
        return completion("", finish="length", completion_tokens=body["max_tokens"],
                          reasoning=THOUGHT)  # fmt: skip

    rt, gw = make_runtime(always_cut)
    rt.store.create_job(job_spec(1), ["input"])
    env = run_node(rt, "j1", "n00")
    assert not env.ok and env.error_kind is ErrorKind.REASONING_CUT
    assert env.error is not None and "raise max_tokens for this model" in env.error
    assert [r["max_tokens"] for r in gw.requests] == [16_384, 32_768]  # once raised, no retry
    # a job already asking the model's limit (max_output_tokens 32,768): not asked again
    rt.store.create_job(job_spec(1, job_id="j2", max_tokens=32_768), ["input"])
    with caplog.at_level(logging.INFO, logger="swarm.calls.reasoning"):
        env = run_node(rt, "j2", "n00")
    assert env.error_kind is ErrorKind.REASONING_CUT and len(gw.requests) == 3
    assert "the most the model allows here: not asked again" in caplog.text


def agent_steps(model: str) -> Callable[[dict[str, Any], int], httpx2.Response]:
    def handler(body: dict[str, Any], n: int) -> httpx2.Response:
        if n == 1:
            return tool_call_answer(("add", '{"a": 2}'), reasoning=THOUGHT)
        return completion("done")

    return handler


def test_moonshot_tool_call_messages_go_back_with_their_reasoning(
    make_runtime: MakeRuntime,
) -> None:
    rt, gw = make_runtime(agent_steps("kimi-k2.5"))
    rt.store.create_job(job_spec(1, tools="agent_tools"), ["input 0"])
    env = run_node(rt, "j1", "n00")
    assert env.ok and env.content == "done"
    assistant = [m for m in gw.requests[1]["messages"] if m["role"] == "assistant"]
    assert assistant[0]["reasoning_content"] == THOUGHT and assistant[0]["tool_calls"]


def test_a_plain_providers_tool_call_messages_go_back_without_it(
    make_runtime: MakeRuntime,
) -> None:
    rt, gw = make_runtime(agent_steps("claude-sonnet-4.5"))
    spec = job_spec(1, tools="agent_tools").model_copy(update={"model": "claude-sonnet-4.5"})
    rt.store.create_job(spec, ["input 0"])
    assert run_node(rt, "j1", "n00").ok
    assistant = [m for m in gw.requests[1]["messages"] if m["role"] == "assistant"]
    assert assistant[0]["tool_calls"] and "reasoning_content" not in assistant[0]


def test_a_replayed_step_sends_the_same_reasoning_back(make_runtime: MakeRuntime) -> None:
    rt, gw = make_runtime(agent_steps("kimi-k2.5"))
    spec = job_spec(1, tools="agent_tools")
    rt.store.create_job(spec, ["input 0"])
    assert run_node(rt, "j1", "n00").ok
    # As if the worker died before storing the envelope: step 0's answer is replayed from
    # the store with its reasoning, so step 1 has the key it had and is replayed too.
    again = call_node(rt, spec, "n00", "input 0")
    assert again.content == "done" and len(gw.requests) == 2
