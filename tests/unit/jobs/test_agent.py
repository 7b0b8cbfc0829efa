from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import agent_tools
import httpx2
from doubles import MockGateway, completion, job_spec, tool_call_answer

from swarm.calls.runtime import Runtime
from swarm.catalog import load_catalog
from swarm.jobs.report import ModelLine, model_lines, with_tool_counts
from swarm.jobs.subagent import call_node, run_node
from swarm.jobs.tally import tally
from swarm.records import ErrorKind, JobSpec, NodeEnvelope
from swarm.settings import Settings
from swarm.store import MemoryJobStore

MakeRuntime = Callable[..., tuple[Runtime, MockGateway]]


def with_tool_validity(
    lines: dict[str, ModelLine], nodes: list[NodeEnvelope]
) -> dict[str, ModelLine]:
    """Each model's line with its nodes' tool calls and the share that were valid."""
    counts = tally(nodes).counts()
    return with_tool_counts(lines, counts.tool_calls, counts.tool_calls_invalid)


def agent_job(rt: Runtime, tools: str = "agent_tools", n: int = 1) -> JobSpec:
    spec = job_spec(n, tools=tools)
    rt.store.create_job(spec, [f"input {i}" for i in range(n)])
    return spec


def steps(*answers: httpx2.Response) -> Callable[[dict[str, Any], int], httpx2.Response]:
    def handler(body: dict[str, Any], n: int) -> httpx2.Response:
        return answers[min(n, len(answers)) - 1]

    return handler


def test_tools_run_then_the_model_answers(make_runtime: MakeRuntime) -> None:
    rt, gw = make_runtime(
        steps(
            tool_call_answer(("add", '{"a": 2}'), ("shout", '{"text": "hi"}')), completion("done")
        )
    )
    agent_job(rt)
    env = run_node(rt, "j1", "n00")
    assert env.ok and env.content == "done"
    assert (env.steps, env.tool_calls, env.tool_errors) == (2, 2, 0)
    assert env.tools_used == ("add(a=2)", "shout(text='hi')")
    first, second = gw.requests
    assert [t["function"]["name"] for t in first["tools"]][:2] == ["add", "shout"]
    tool_messages = [m for m in second["messages"] if m["role"] == "tool"]
    assert [(m["tool_call_id"], m["content"]) for m in tool_messages] == [("c0", "3"), ("c1", "HI")]
    transcript = rt.store.transcript("j1", "n00")
    assert transcript is not None and transcript.ended == "answered"
    assert [m["role"] for m in transcript.messages] == [
        "system", "user", "assistant", "tool", "tool", "assistant"
    ]  # fmt: skip
    assert rt.store.ledger("j1")["kimi-k2.5"].calls == 2


def test_a_node_run_again_replays_stored_steps_and_tool_results(make_runtime: MakeRuntime) -> None:
    rt, gw = make_runtime(
        steps(
            tool_call_answer(("add", '{"a": 40}')),
            tool_call_answer(("add", '{"a": 41}')),
            completion("done"),
        )
    )
    spec = agent_job(rt)
    agent_tools.CALLS.clear()
    first = run_node(rt, "j1", "n00")
    assert (
        first.steps == 3
        and len(gw.requests) == 3
        and agent_tools.CALLS == ["add(40,1)", "add(41,1)"]
    )
    # As if the worker died before storing the envelope: the node runs again from step 0.
    again = call_node(rt, spec, "n00", "input 0")
    assert again.content == "done" and again.steps == 3
    assert len(gw.requests) == 3 and agent_tools.CALLS == ["add(40,1)", "add(41,1)"]
    assert rt.store.ledger("j1")["kimi-k2.5"].calls == 3


def test_the_third_identical_call_ends_the_node(make_runtime: MakeRuntime) -> None:
    rt, gw = make_runtime(steps(tool_call_answer(("add", '{"a": 1, "b": 2}'))))
    agent_job(rt)
    agent_tools.CALLS.clear()
    env = run_node(rt, "j1", "n00")
    assert env.error_kind is ErrorKind.TOOL_LOOP and "third time: add(a=1, b=2)" in (
        env.error or ""
    )
    assert env.steps == 3 and len(gw.requests) == 3 and agent_tools.CALLS == ["add(1,2)"] * 2
    transcript = rt.store.transcript("j1", "n00")
    assert transcript is not None and transcript.ended.startswith("tool_loop")
    assert sum(m["role"] == "assistant" for m in transcript.messages) == 3


def test_malformed_calls_are_answered_and_counted(make_runtime: MakeRuntime) -> None:
    rt, gw = make_runtime(
        steps(
            tool_call_answer(("add", '{"a": '), ("nope", "{}"), ("add", '{"a": 1}')),
            completion("fixed"),
        )
    )
    spec = agent_job(rt)
    env = run_node(rt, "j1", "n00")
    assert env.ok and (env.tool_calls, env.tool_errors, env.tool_calls_invalid) == (3, 2, 2)
    answers = [m["content"] for m in gw.requests[1]["messages"] if m["role"] == "tool"]
    assert answers[0].startswith("error: the arguments of add are not JSON")
    assert answers[1].startswith("error: unknown tool 'nope'") and answers[2] == "2"
    lines = with_tool_validity(model_lines(rt.catalog, rt.store.ledger(spec.job_id)), [env])
    assert lines["kimi-k2.5"].tool_calls == 3
    assert lines["kimi-k2.5"].tool_call_validity == round(1 / 3, 4)


def test_steps_and_tool_calls_are_capped(make_runtime: MakeRuntime) -> None:
    def distinct(body: dict[str, Any], n: int) -> httpx2.Response:
        return tool_call_answer(("add", json.dumps({"a": n})))

    rt, gw = make_runtime(distinct)
    agent_job(rt)
    env = run_node(rt, "j1", "n00")
    assert env.error_kind is ErrorKind.TOOL_LOOP and env.error == "no answer after 8 steps"
    assert env.steps == 8 == len(gw.requests)

    def wide(body: dict[str, Any], n: int) -> httpx2.Response:
        return tool_call_answer(*[("add", json.dumps({"a": n, "b": i})) for i in range(10)])

    rt, gw = make_runtime(wide)
    agent_job(rt)
    env = run_node(rt, "j1", "n00")
    assert env.error_kind is ErrorKind.TOOL_LOOP and env.error == "more than 24 tool calls"
    assert env.steps == 3 and env.tool_calls == 30


def test_a_missing_toolset_is_one_error_on_the_node(make_runtime: MakeRuntime) -> None:
    rt, gw = make_runtime(steps(completion("never")))
    agent_job(rt, tools="not_installed_anywhere.tools")
    env = run_node(rt, "j1", "n00")
    assert env.error_kind is ErrorKind.TOOLS_UNAVAILABLE and gw.requests == []
    assert "cannot import not_installed_anywhere" in (env.error or "")


def test_tool_less_calls_keep_their_idempotency_key(make_runtime: MakeRuntime) -> None:
    from swarm.calls.request import CallRequest

    rt, _ = make_runtime(steps(completion("x")))
    model = rt.catalog.model("kimi-k2.5")
    plain = CallRequest.of("j", "n", model, [{"role": "user", "content": "hi"}], 10)
    assert (
        plain.key
        == "j:n:kimi-k2.5:"
        + __import__("hashlib")
        .sha256(json.dumps([[{"role": "user", "content": "hi"}], 10], sort_keys=True).encode())
        .hexdigest()[:32]
    )
    tooled = CallRequest.of(
        "j", "n", model, [{"role": "user", "content": "hi"}], 10, tools=({"a": 1},)
    )
    assert tooled.key != plain.key and "tools" in tooled.body() and "tools" not in plain.body()


def test_a_node_stopped_by_the_budget_keeps_its_transcript(make_runtime: MakeRuntime) -> None:
    rt, gw = make_runtime(steps(tool_call_answer(("add", '{"a": 1}'), prompt=1500)))
    # the job's cap as asked with --max-tokens 2048: one step's bound fits, two do not
    spec = job_spec(1, tools="agent_tools", budget_usd=0.004, max_tokens=2048)
    rt.store.create_job(spec, ["input 0"])
    env = run_node(rt, "j1", "n00")
    assert env.error_kind is ErrorKind.BUDGET_EXCEEDED and env.steps == 1 == len(gw.requests)
    transcript = rt.store.transcript("j1", "n00")
    assert transcript is not None and transcript.ended.startswith("budget_exceeded")
    assert [m["role"] for m in transcript.messages][-2:] == ["assistant", "tool"]


def test_the_node_timeout_is_a_deadline_over_the_loop(fast_settings: Settings) -> None:
    def slow_steps(body: dict[str, Any], n: int) -> httpx2.Response:
        return tool_call_answer(("slow", json.dumps({"seconds": n})))

    gw = MockGateway(slow_steps)
    settings = fast_settings.model_copy(update={"agent_timeout_s": 0.3})
    rt = Runtime(settings, load_catalog(), MemoryJobStore(), gw.client())
    agent_job(rt)
    env = run_node(rt, "j1", "n00")
    assert env.error_kind is ErrorKind.TIMEOUT and "deadline of 0.3 s" in (env.error or "")
    # Each step's tool times out after 0.2 s, so the deadline ends the loop long before
    # its 8 steps; how many steps fit depends on the machine.
    assert env.tool_errors == env.tool_calls == len(gw.requests) < 8


def test_a_schema_fix_up_continues_the_agent_conversation(make_runtime: MakeRuntime) -> None:
    rt, gw = make_runtime(
        steps(
            tool_call_answer(("add", '{"a": 2}')),
            completion("the sum is three"),  # not the JSON the job asks for
            completion('{"sum": 3}'),
        )
    )
    schema = {"type": "object", "required": ["sum"], "properties": {"sum": {"type": "integer"}}}
    spec = job_spec(1, tools="agent_tools", output_schema=schema)
    rt.store.create_job(spec, ["input 0"])
    env = run_node(rt, "j1", "n00")
    assert env.ok and json.loads(env.content) == {"sum": 3}
    assert (env.steps, env.tool_calls) == (2, 1)
    fix = gw.requests[2]
    roles = [m["role"] for m in fix["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert fix["messages"][3]["content"] == "3"  # the tool's result is in what the fix-up sees
    assert fix["messages"][4]["content"] == "the sum is three"
    assert fix["response_format"] == {"type": "json_object"} and "tools" not in fix
