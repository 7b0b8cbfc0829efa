"""swarm.tracing's spans, made in this process into an in-memory exporter: a node's span
with its attempts and tool calls under it, retry events, the job's stored root, batch
lines, and nothing at all while tracing is off."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import httpx2
import pytest
from doubles import MockGateway, completion, job_spec, tool_call_answer
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from swarm import tracing
from swarm.calls import steps
from swarm.calls.admission import AdmissionPolicy, MemoryAdmission, Outcome
from swarm.calls.admission.base import Ask
from swarm.calls.request import CallProgress
from swarm.calls.runtime import Runtime
from swarm.catalog import load_catalog
from swarm.errors import RetryLater
from swarm.jobs.aggregation import run_aggregation
from swarm.jobs.subagent import NodeCall, call_node, run_node
from swarm.records import JobSpec, Usage
from swarm.settings import Settings
from swarm.store import MemoryJobStore

MakeRuntime = Callable[..., tuple[Runtime, MockGateway]]
ATTEMPT = "chat kimi-k2.5"


@pytest.fixture
def exported() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.reset()
    tracing.use(provider)
    try:
        yield exporter
    finally:
        tracing.reset()


def answers(*responses: httpx2.Response) -> Callable[[dict[str, Any], int], httpx2.Response]:
    def handler(body: dict[str, Any], n: int) -> httpx2.Response:
        return responses[min(n, len(responses)) - 1]

    return handler


def stored_job(rt: Runtime, **fields: Any) -> JobSpec:
    """A one-node job stored with a root span's traceparent, as the producer stores it."""
    with tracing.submitting(job_spec(1, **fields)) as spec:
        rt.store.create_job(spec, ["input 0"])
    return spec


def by_name(spans: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def usage_of(span: ReadableSpan) -> Usage:
    a = span.attributes or {}
    return Usage(
        prompt_tokens=int(a["gen_ai.usage.input_tokens"]),  # type: ignore[arg-type]
        completion_tokens=int(a["gen_ai.usage.output_tokens"]),  # type: ignore[arg-type]
        cached_tokens=int(a["gen_ai.usage.cache_read.input_tokens"]),  # type: ignore[arg-type]
    )


def test_a_node_span_holds_its_attempts_and_tool_calls(
    make_runtime: MakeRuntime, exported: InMemorySpanExporter
) -> None:
    rt, _ = make_runtime(answers(
        tool_call_answer(("add", '{"a": 2}')), completion("done", prompt=30, cached=8),
    ))  # fmt: skip
    spec = stored_job(rt, tools="agent_tools")
    envelope = run_node(rt, spec.job_id, "n00")  # on a thread with no trace context
    assert envelope.ok
    spans = exported.get_finished_spans()
    (root,) = by_name(spans, "submit")
    (node,) = by_name(spans, "invoke_agent sub-agent")
    attempts = by_name(spans, "chat kimi-k2.5")
    (tool,) = by_name(spans, "execute_tool add")
    assert {s.context.trace_id for s in spans} == {root.context.trace_id}
    assert node.parent is not None and node.parent.span_id == root.context.span_id
    assert [a.parent.span_id for a in attempts if a.parent] == [node.context.span_id] * 2
    assert tool.parent is not None and tool.parent.span_id == node.context.span_id
    assert tool.attributes is not None and tool.attributes["gen_ai.tool.call.id"] == "c0"
    # the attempts' usage is the ledger's, and the node's envelope's
    total = sum((usage_of(a) for a in attempts), Usage())
    assert total == rt.store.ledger("j1")["kimi-k2.5"].usage == envelope.usage
    assert node.attributes is not None
    assert node.attributes["swarm.node.status"] == "ok" and node.attributes["swarm.attempts"] == 2
    assert [a.attributes["swarm.attempt"] for a in attempts if a.attributes] == [1, 1]
    last = attempts[-1].attributes or {}
    assert last["gen_ai.usage.cache_read.input_tokens"] == 8
    assert last["gen_ai.usage.reasoning.output_tokens"] == 0
    assert last["gen_ai.response.finish_reasons"] == ("stop",)
    assert "gen_ai.input.messages" not in last  # content only when opted in


def test_a_retry_is_an_event_and_the_failed_attempt_says_why(
    make_runtime: MakeRuntime, exported: InMemorySpanExporter
) -> None:
    server_error = httpx2.Response(500, json={"error": {"message": "boom"}})
    rt, _ = make_runtime(answers(server_error, completion("ok")))
    spec = stored_job(rt)
    assert run_node(rt, spec.job_id, "n00").ok
    spans = exported.get_finished_spans()
    (node,) = by_name(spans, "invoke_agent sub-agent")
    first, second = by_name(spans, "chat kimi-k2.5")
    assert first.attributes is not None and first.attributes["error.type"] == "server_error"
    assert not first.status.is_ok and second.status.is_ok
    assert second.attributes is not None and second.attributes["swarm.attempt"] == 2
    retries = [e for e in node.events if e.name == "retry"]
    assert [(e.attributes or {}).get("swarm.reason") for e in retries] == ["server_error"]


def test_a_node_on_another_trace_joins_the_jobs_stored_root(
    make_runtime: MakeRuntime, exported: InMemorySpanExporter
) -> None:
    rt, _ = make_runtime(answers(completion("ok")))
    spec = stored_job(rt)
    other = TracerProvider().get_tracer("elsewhere")
    with other.start_as_current_span("a message from a process that does not trace"):
        run_node(rt, spec.job_id, "n00")
    (root,) = by_name(exported.get_finished_spans(), "submit")
    (node,) = by_name(exported.get_finished_spans(), "invoke_agent sub-agent")
    assert node.context.trace_id == root.context.trace_id
    assert node.parent is not None and node.parent.span_id == root.context.span_id


def test_a_batch_lines_span_starts_at_its_batch_and_names_it(
    make_runtime: MakeRuntime, exported: InMemorySpanExporter
) -> None:
    rt, _ = make_runtime(answers(completion("ok")))
    spec = stored_job(rt)
    created = time.time() - 60
    with tracing.batch_file("batch_abc", created):
        ctx = tracing.capture()
    seen: list[Any] = []

    def node_thread() -> None:  # the node runs on another thread, as in a batch task
        with tracing.attached(ctx), tracing.node(spec, "n00", via="batch") as span:
            seen.append(span)

    thread = threading.Thread(target=node_thread)
    thread.start()
    thread.join()
    (node,) = by_name(exported.get_finished_spans(), "invoke_agent sub-agent")
    assert node.attributes is not None and node.attributes["swarm.batch.id"] == "batch_abc"
    assert node.attributes["swarm.via"] == "batch"
    assert node.start_time == int(created * 1e9)


def test_off_there_is_no_span_and_no_step(make_runtime: MakeRuntime) -> None:
    tracing.reset()
    assert not tracing.setup("swarm", environ={})  # no OTEL_* exporter: off
    try:
        rt, _ = make_runtime(answers(completion("ok")))
        spec = stored_job(rt)
        assert spec.trace_parent is None
        # every hook hands back the one shared no-op, and the call path gets no trace step
        assert tracing.node(spec, "n00") is tracing.job_step(spec, "aggregate")
        assert tracing.tool("add", "c0") is tracing.node(spec, "n00")
        assert tracing.capture() is None and tracing.attempts(rt.catalog, rt.catalog.model(
            "kimi-k2.5"), 0, None) is None  # fmt: skip
        assert steps.tracing_attempts(object()) is None  # type: ignore[arg-type]
        assert run_node(rt, spec.job_id, "n00").ok
    finally:
        tracing.reset()


def test_a_429_that_requeues_is_the_attempts_error_and_the_nodes_requeue_event(
    exported: InMemorySpanExporter,
) -> None:
    gw = MockGateway(lambda body, n: httpx2.Response(
        429, headers={"Retry-After": "3"}, json={"error": {"message": "slow"}}
    ) if n == 1 else completion("ok"))  # fmt: skip
    settings = Settings(max_attempts=3, backoff_max_s=0.01, admission_max_wait_s=0.5)
    admission = MemoryAdmission(AdmissionPolicy(max_wait_s=0.5))
    rt = Runtime(settings, load_catalog(), MemoryJobStore(), gw.client(), admission=admission)
    spec = stored_job(rt)
    with pytest.raises(RetryLater) as later:
        run_node(rt, spec.job_id, "n00", NodeCall(may_requeue=True))
    progress = {"n00": CallProgress(later.value.attempts, time.time())}
    run_node(rt, spec.job_id, "n00", NodeCall(may_requeue=False, progress=progress))  # the next run
    spans = exported.get_finished_spans()
    (root,) = by_name(spans, "submit")
    first_run, second_run = by_name(spans, "invoke_agent sub-agent")
    limited, answered = by_name(spans, "chat kimi-k2.5")
    assert {s.context.trace_id for s in spans} == {root.context.trace_id}
    assert limited.attributes is not None and limited.attributes["error.type"] == "rate_limited"
    requeue = [e for e in first_run.events if e.name == "requeue"]
    assert len(requeue) == 1 and (requeue[0].attributes or {})["swarm.reason"] == "paused"
    assert first_run.attributes is not None and first_run.attributes["swarm.requeued"]
    assert answered.attributes is not None and answered.attributes["swarm.attempt"] == 2
    assert second_run.attributes is not None
    assert second_run.attributes["swarm.node.status"] == "ok"


def test_an_admission_wait_is_an_event_and_a_total_on_the_attempt(
    exported: InMemorySpanExporter,
) -> None:
    gw = MockGateway(lambda body, n: completion("ok"))
    settings = Settings(max_attempts=3, backoff_max_s=0.01, admission_max_wait_s=0.5)
    admission = MemoryAdmission(AdmissionPolicy(max_wait_s=0.5))
    rt = Runtime(settings, load_catalog(), MemoryJobStore(), gw.client(), admission=admission)
    spec = stored_job(rt)
    model = rt.catalog.model(spec.model)
    paused = Outcome(used_tokens=0, rate_limited=True, retry_after_s=0.2, exhausted=True)
    rt.admission.finish(model, rt.admission.acquire(model, Ask("other", 1)).permit, paused)
    assert run_node(rt, spec.job_id, "n00").ok
    (attempt,) = by_name(exported.get_finished_spans(), "chat kimi-k2.5")
    waits = [e for e in attempt.events if e.name == "admission wait"]
    assert waits and all((e.attributes or {})["swarm.reason"] == "paused" for e in waits)
    assert attempt.attributes is not None
    assert attempt.attributes["swarm.admission.wait_s"] == pytest.approx(
        sum(float((e.attributes or {})["swarm.wait_s"]) for e in waits)  # type: ignore[arg-type]
    )


def test_the_aggregation_and_its_reduce_levels_are_spans_over_their_calls(
    make_runtime: MakeRuntime, exported: InMemorySpanExporter
) -> None:
    def handler(body: dict[str, Any], n: int) -> httpx2.Response:
        if "sub-agents:" in body["messages"][-1]["content"]:
            return completion("merged", prompt=100, completion_tokens=20)
        return completion("finding " * 500, prompt=100, completion_tokens=600)

    rt, _ = make_runtime(handler)
    small = rt.catalog.models["kimi-k2.5"].model_copy(
        update={"context_window": 4096, "max_tokens": 256}
    )
    models = {**rt.catalog.models, "kimi-k2.5": small}
    rt = dataclasses.replace(rt, catalog=rt.catalog.model_copy(update={"models": models}))
    with tracing.submitting(job_spec(20)) as spec:
        rt.store.create_job(spec, [f"def f{i}(): pass" for i in range(20)])
    for node in spec.node_ids:
        assert run_node(rt, spec.job_id, node).ok
    exported.clear()
    assert run_aggregation(rt, spec.job_id)["status"] == "succeeded"
    spans = exported.get_finished_spans()
    (aggregate,) = by_name(spans, "aggregate")
    levels = [s for s in spans if s.name.startswith("reduce level ")]
    assert levels and all(s.parent and s.parent.span_id == aggregate.context.span_id
                          for s in levels)  # fmt: skip
    by_id = {s.context.span_id: s for s in spans}
    parents = Counter(by_id[s.parent.span_id].name for s in by_name(spans, "chat kimi-k2.5")
                      if s.parent)  # fmt: skip
    assert parents["aggregate"] == 1  # the final merge
    assert sum(n for name, n in parents.items() if name.startswith("reduce level ")) >= 2
    assert len({s.context.trace_id for s in spans}) == 1


def test_a_hedge_taken_is_an_event_with_its_reason(exported: InMemorySpanExporter) -> None:
    answers_ = iter([False, True])
    take = tracing.wrap_counted("hedge", lambda: next(answers_), reason="slow attempt")
    with tracing.node(job_spec(1), "n00") as span:
        assert (take(), take()) == (False, True)
    assert [(e.name, dict(e.attributes or {})) for e in span.events] == [
        ("hedge", {"swarm.reason": "slow attempt"})
    ]


def test_a_node_run_again_says_it_reused_the_stored_answer(
    make_runtime: MakeRuntime, exported: InMemorySpanExporter
) -> None:
    rt, gw = make_runtime(answers(completion("ok")))
    spec = stored_job(rt)
    assert run_node(rt, spec.job_id, "n00").ok
    call_node(rt, spec, "n00", "input 0")  # as if redelivered before its envelope was read
    first, again = by_name(exported.get_finished_spans(), "invoke_agent sub-agent")
    assert len(gw.requests) == 1 and len(by_name(exported.get_finished_spans(), ATTEMPT)) == 1
    assert first.attributes is not None and "swarm.reused_answer" not in first.attributes
    assert again.attributes is not None and again.attributes["swarm.reused_answer"] is True
    assert [e.name for e in again.events] == ["reused answer"]
