"""In the domain: planner, routing with fallbacks, context overflow, strict JSON
and hierarchical aggregation, against the simulator over HTTP (in a thread) or a mock."""

from __future__ import annotations

import base64
import dataclasses
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx2
import pytest
from doubles import MockGateway, completion

from swarm.calls.gateway import make_client
from swarm.calls.runtime import Runtime
from swarm.catalog import load_catalog
from swarm.jobs.aggregation import run_aggregation
from swarm.jobs.planner import run_plan
from swarm.jobs.subagent import run_node
from swarm.records import ErrorKind, JobSpec, NodeTask
from swarm.settings import Settings
from swarm.sim import SimConfig, start_in_thread
from swarm.store import MemoryJobStore
from swarm.tokens import estimate_messages

SCHEMA = {
    "type": "object",
    "required": ["risks", "summary"],
    "properties": {
        "risks": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["severity"],
                "properties": {"severity": {"enum": ["high", "low"]}},
            },
        },
        "summary": {"type": "string"},
    },
}


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    with start_in_thread(SimConfig()) as sim:
        yield sim.base_url


@pytest.fixture
def rt(sim_url: str) -> Runtime:
    settings = Settings(max_attempts=2, backoff_max_s=0.01, node_timeout_s=10)
    return Runtime(settings, load_catalog(), MemoryJobStore(), make_client(settings, sim_url, "k"))


def reply(text: str) -> str:
    return f"[[sim:reply_b64={base64.urlsafe_b64encode(text.encode()).decode()}]]"


def job(rt: Runtime, texts: list[str], **fields: Any) -> JobSpec:
    spec = JobSpec(
        job_id="j",
        instruction=fields.pop("instruction", "review"),
        aggregate_instruction="merge",
        model="kimi-k2.5",
        aggregate_model="kimi-k2.5",
        node_ids=tuple(f"n{i}" for i in range(len(texts))),
        input_refs=tuple(f"doc{i}.txt" for i in range(len(texts))),
        submitted_at=time.time(),
        **fields,
    )
    rt.store.create_job(spec, texts)
    return spec


def test_planner_routes_each_document_by_kind(rt: Runtime) -> None:
    job(rt, ["paper one", "paper two", "paper three"], instruction="compare the papers")
    planned = run_plan(rt, "j")
    assert planned is not None and rt.store.spec("j") == planned
    assert sorted(planned.input_refs) == ["doc0.txt", "doc1.txt", "doc2.txt"]
    routing = rt.catalog.routing
    for node_id in planned.node_ids:
        task = planned.task(node_id)
        assert task.kind in routing and task.model == routing[task.kind][0]
        assert task.fallback_models == routing[task.kind][1:]
        assert rt.store.input_text("j", node_id).startswith("paper")
    assert rt.store.ledger("j")["kimi-k2.5"].calls == 1  # the planner call is billed


@pytest.mark.parametrize("answer", ["this is not a plan", '{"subtasks": []}', '{"plan": 1}'])
def test_unusable_plans_are_retried_once_then_fail_the_job(rt: Runtime, answer: str) -> None:
    job(rt, ["a", "b"], instruction=f"compare {reply(answer)}")
    assert run_plan(rt, "j") is None
    report = rt.store.report("j")
    assert report is not None and report["status"] == "failed"
    assert "planner gave no usable plan" in report["error"] and report["total"] == 0
    assert rt.store.ledger("j")["kimi-k2.5"].calls == 2  # the plan and its one retry


def test_several_megabyte_input_is_cut_and_its_middle_summarised(rt: Runtime) -> None:
    big = "".join(f"line {i:07d} of a very long log\n" for i in range(110_000))  # ~3.5 MB
    job(rt, [big])
    env = run_node(rt, "j", "n0")
    assert env.ok and env.truncation is not None
    t = env.truncation
    assert t.original_chars == len(big) and t.kept_chars + t.summarized_chars == len(big)
    assert t.summary_chars > 0 and t.original_tokens > 262_144
    ledger = rt.store.ledger("j")
    assert ledger["gemini-2.5-flash"].calls == 1 and ledger["kimi-k2.5"].calls == 1
    assert env.usage.prompt_tokens == sum(line.usage.prompt_tokens for line in ledger.values())


def test_json_answers_follow_the_schema(rt: Runtime) -> None:
    job(rt, ["diff"], output_schema=SCHEMA)
    env = run_node(rt, "j", "n0")
    assert env.ok and json.loads(env.content)["summary"]


def test_broken_json_is_repaired(rt: Runtime) -> None:
    broken = 'Sure:\n```json\n{"risks": [{"severity": "high"}], "summary": "x",}\n```'
    job(rt, [f"diff {reply(broken)}"], output_schema=SCHEMA)
    env = run_node(rt, "j", "n0")
    assert env.ok and env.attempts == 1


def test_schema_mismatch_is_retried_once_with_the_error(rt: Runtime) -> None:
    wrong = '{"risks": [{"severity": "catastrophic"}], "summary": "x"}'
    job(rt, [f"diff {reply(wrong)}"], output_schema=SCHEMA)
    env = run_node(rt, "j", "n0")
    assert env.ok and json.loads(env.content)["risks"][0]["severity"] in ("high", "low")
    assert rt.store.ledger("j")["kimi-k2.5"].calls == 2 and env.attempts == 2


def test_still_wrong_after_the_retry_is_bad_output_with_the_raw_text(
    make_runtime: Callable[..., tuple[Runtime, MockGateway]],
) -> None:
    wrong = '{"risks": [{"severity": "catastrophic"}], "summary": "x"}'
    rt, gw = make_runtime(lambda body, n: completion(wrong))
    job(rt, ["diff"], output_schema=SCHEMA)
    env = run_node(rt, "j", "n0")
    assert env.status == "error" and env.error_kind is ErrorKind.BAD_OUTPUT
    assert env.content == wrong and "risks.0.severity" in (env.error or "")
    assert len(gw.requests) == 2 and "Rejected" in gw.requests[1]["messages"][-1]["content"]
    assert gw.requests[0]["response_format"] == {"type": "json_object"}


def test_a_failing_model_falls_back_to_the_next_of_its_kind(
    make_runtime: Callable[..., tuple[Runtime, MockGateway]],
) -> None:
    def handler(body: dict[str, Any], n: int) -> httpx2.Response:
        if body["model"] == "gemini-2.5-flash":
            return httpx2.Response(503, json={"error": {"message": "overloaded"}})
        return completion("from the fallback")

    rt, gw = make_runtime(handler)
    job(
        rt,
        ["x"],
        tasks={
            "n0": NodeTask(
                model="gemini-2.5-flash",
                instruction="extract",
                kind="extract",
                fallback_models=("deepseek-v3.2",),
            )
        },
    )
    env = run_node(rt, "j", "n0")
    assert env.ok and env.model == "deepseek-v3.2" and env.kind == "extract"
    assert [r["model"] for r in gw.requests] == ["gemini-2.5-flash"] * 3 + ["deepseek-v3.2"]
    assert env.attempts == 4


def test_non_transient_errors_do_not_fall_back(
    make_runtime: Callable[..., tuple[Runtime, MockGateway]],
) -> None:
    rt, gw = make_runtime(lambda body, n: httpx2.Response(400, json={"error": {}}))
    job(rt, ["x"], fallback_models=("deepseek-v3.2",))
    assert run_node(rt, "j", "n0").error_kind is ErrorKind.BAD_REQUEST and len(gw.requests) == 1


def test_thousand_results_aggregate_through_a_tree(
    make_runtime: Callable[..., tuple[Runtime, MockGateway]],
) -> None:
    rt, gw = make_runtime(lambda body, n: completion("finding " + "x" * 400, prompt=50))
    small = rt.catalog.models["kimi-k2.5"].model_copy(
        update={"context_window": 30_000, "max_tokens": 1000}
    )
    catalog = rt.catalog.model_copy(update={"models": {**rt.catalog.models, "kimi-k2.5": small}})
    rt = dataclasses.replace(rt, catalog=catalog)
    spec = job(rt, [f"input {i}" for i in range(1000)])
    for node_id in spec.node_ids:
        run_node(rt, "j", node_id)
    report = run_aggregation(rt, "j")
    assert report["status"] == "succeeded" and report["succeeded"] == 1000
    aggregation_calls = gw.requests[1000:]
    assert len(aggregation_calls) > 2  # reduce steps, then the final call
    for request in aggregation_calls:
        assert sum(len(m["content"]) for m in request["messages"]) / 4 < small.context_window
    final_prompt = aggregation_calls[-1]["messages"][-1]["content"]
    assert 'node="r' in final_prompt  # the final call merges intermediate summaries
    assert report["models"]["kimi-k2.5"]["calls"] == 1000 + len(aggregation_calls)


def test_report_flags_truncated_inputs_and_cut_outputs(rt: Runtime) -> None:
    big = "word " * 1_200_000  # ~6 MB: over kimi's window
    job(rt, [big, "short"], max_tokens=5)
    for node_id in ("n0", "n1"):
        run_node(rt, "j", node_id)
    report = run_aggregation(rt, "j")
    assert report["inputs_truncated"] == 1
    assert report["truncated"] == 2  # the simulator's answers exceed 5 tokens
    nodes = rt.store.report_nodes("j")
    assert len(nodes) == 2 and all(n["finish_reason"] == "length" for n in nodes)


def test_a_fix_up_refused_as_too_long_leaves_the_first_answer_as_bad_output(
    make_runtime: Callable[..., tuple[Runtime, MockGateway]],
) -> None:
    wrong = '{"risks": [{"severity": "catastrophic"}], "summary": "x"}'

    def handler(body: dict[str, Any], n: int) -> httpx2.Response:
        if n == 1:
            return completion(wrong)
        message = "This model's maximum context length is 4096 tokens. However, you requested"
        return httpx2.Response(400, json={"error": {"message": f"{message} 5025 tokens"}})

    rt, gw = make_runtime(handler)
    job(rt, ["diff"], output_schema=SCHEMA)
    env = run_node(rt, "j", "n0")
    assert env.status == "error" and env.error_kind is ErrorKind.BAD_OUTPUT, env.error
    assert env.content == wrong and "risks.0.severity" in (env.error or "")
    assert len(gw.requests) == 2


def test_the_fix_up_echoes_the_rejected_answer_clipped_to_the_window(
    make_runtime: Callable[..., tuple[Runtime, MockGateway]],
) -> None:
    long_wrong = '{"summary": "' + "words " * 2500 + '"}'  # ~3,750 estimated tokens
    rt, gw = make_runtime(lambda body, n: completion(long_wrong))
    rt.windows.learn("kimi-k2.5", 4096)  # a local server's window, smaller than the catalog's
    job(rt, ["diff"], output_schema=SCHEMA, max_tokens=2048)  # a cap that fits that window
    run_node(rt, "j", "n0")
    fix = gw.requests[1]
    echoed = fix["messages"][-2]
    assert echoed["role"] == "assistant" and long_wrong.startswith(echoed["content"])
    assert len(echoed["content"]) < len(long_wrong)
    prompt = estimate_messages(m["content"] for m in fix["messages"])
    assert prompt + fix["max_tokens"] <= 4096


def test_a_backend_out_of_balance_falls_back_to_a_model_of_another_backend(
    make_runtime: Callable[..., tuple[Runtime, MockGateway]],
) -> None:
    quota = {"message": "Insufficient Balance", "type": "unknown_error"}

    def handler(body: dict[str, Any], n: int) -> httpx2.Response:
        if body["model"] == "gemini-2.5-flash":
            return httpx2.Response(402, json={"error": quota})
        return completion("from the other account")

    rt, gw = make_runtime(handler)
    other = rt.catalog.backends["default"].model_copy()
    moved = rt.catalog.models["deepseek-v3.2"].model_copy(update={"backend": "other"})
    catalog = rt.catalog.model_copy(
        update={
            "backends": {**rt.catalog.backends, "other": other},
            "models": {**rt.catalog.models, "deepseek-v3.2": moved},
        }
    )
    rt = dataclasses.replace(rt, catalog=catalog)
    task = NodeTask(model="gemini-2.5-flash", instruction="extract", kind="extract",
                    fallback_models=("deepseek-v3.2",))  # fmt: skip
    job(rt, ["x"], tasks={"n0": task})
    env = run_node(rt, "j", "n0")
    assert env.ok and env.model == "deepseek-v3.2"
    assert [r["model"] for r in gw.requests] == ["gemini-2.5-flash", "deepseek-v3.2"]


def test_an_input_cut_because_of_the_jobs_max_tokens_says_so(rt: Runtime) -> None:
    text = "word " * 8000  # about 9,000 tokens: fits kimi-k2.5's window under its own cap
    job(rt, [text], max_tokens=258_000)
    env = run_node(rt, "j", "n0")
    assert env.truncation is not None and env.truncation.max_tokens == 258_000


def test_an_input_over_the_window_whatever_the_cap_is_not_blamed_on_it(rt: Runtime) -> None:
    big = "".join(f"line {i:07d} of a very long log\n" for i in range(110_000))
    job(rt, [big], max_tokens=40_000)
    env = run_node(rt, "j", "n0")
    assert env.truncation is not None and env.truncation.max_tokens is None
