"""Traces end to end (issue 41): real redis-server, the simulator over HTTP, `celery -A
workers worker` processes, and a real OTLP/HTTP receiver (tests/integration/otlp.py) that
decodes what the SDK's exporter sends with the opentelemetry-proto package.

The producer (this process) and every worker trace through the standard OTEL_* variables;
a job is one trace: the producer's submit span, the task spans of the Celery
instrumentation, a span per node, per gateway attempt and for the aggregation.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from faults import inputs, nodes_of, task_lines, wait_until
from otlp import ReceivedSpan, Receiver, otlp_receiver
from stack import API_KEY, Worker, running_stack

from swarm import tracing
from swarm.client import SwarmClient
from swarm.records import Usage

pytestmark = pytest.mark.integration

NODE = "invoke_agent sub-agent"
ATTEMPT = "chat kimi-k2.5"
CONTENT_KEYS = ("gen_ai.input.messages", "gen_ai.output.messages", "input.value", "output.value")


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[Receiver]:
    """An OTLP receiver, and this process (the producer) tracing to it; the workers a test
    starts inherit the same OTEL_* environment."""
    with otlp_receiver() as found:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", found.endpoint)
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
        monkeypatch.setenv("OTEL_SERVICE_NAME", "producer")
        tracing.reset()
        assert tracing.setup("swarm")
        try:
            yield found
        finally:
            tracing.reset()


def traced_stack(redis_server: Any, logs: Path, *workers: Worker, latency_ms: int = 40) -> Any:
    args = ["--latency-p50-ms", str(latency_ms), "--latency-p99-ms", str(latency_ms * 2)]
    return running_stack(redis_server, logs, [*args, "--seed", "7"], workers)


def named(spans: list[ReceivedSpan], name: str) -> list[ReceivedSpan]:
    return [s for s in spans if s.name == name]


def job_done(job_id: str, nodes: int) -> Any:
    """A check that the job's spans arrived: its nodes' (ok), its aggregation's, its root's,
    and the parent of every span of its trace."""

    def check(spans: list[ReceivedSpan]) -> bool:
        ok = {s.attributes["swarm.node.id"] for s in named(spans, NODE)
              if s.attributes.get("swarm.node.status") == "ok"}  # fmt: skip
        roots = [s for s in spans if s.name == "submit" and s.attributes["swarm.job.id"] == job_id]
        trace = [s for s in spans if roots and s.trace_id == roots[0].trace_id]
        received = {s.span_id for s in trace}
        return (
            len(ok) == nodes
            and any(s.name == "aggregate" for s in spans)
            and bool(roots)
            # every span's parent too: a task's span ends after its children, and a worker
            # exports it in a later batch than the aggregate span it holds
            and all(not s.parent_id or s.parent_id in received for s in trace)
        )

    return check


def ancestors(span: ReceivedSpan, by_id: dict[str, ReceivedSpan]) -> list[str]:
    names = []
    while span.parent_id and span.parent_id in by_id:
        span = by_id[span.parent_id]
        names.append(span.name)
    return names


def usage_of(span: ReceivedSpan) -> Usage:
    a = span.attributes
    return Usage(
        prompt_tokens=a.get("gen_ai.usage.input_tokens", 0),
        completion_tokens=a.get("gen_ai.usage.output_tokens", 0),
        cached_tokens=a.get("gen_ai.usage.cache_read.input_tokens", 0),
    )


def test_a_job_is_one_trace_with_a_span_per_node_and_attempt(
    redis_server: Any, tmp_logs: Path, receiver: Receiver
) -> None:
    w1 = Worker("w1", c=4, env={"OTEL_SERVICE_NAME": "w1"})
    w2 = Worker("w2", c=4, env={"OTEL_SERVICE_NAME": "w2"})
    with traced_stack(redis_server, tmp_logs, w1, w2) as stack:
        # several nodes per task message (swarm.jobs.batch): node spans on node threads
        client = SwarmClient.from_settings(stack.settings(nodes_per_task=4))
        handle = client.submit(inputs(20, "trace"), "Summarise this document")
        report = handle.wait(timeout=120).to_dict()
        assert report["status"] == "succeeded", report.get("error")
        spans = receiver.wait_for(job_done(handle.id, 20), 30, "the job's spans")
        ledger = client.store.ledger(handle.id)
        envelopes = {env.node_id: env for env in client.store.envelopes(handle.id)}
        client.close()

    root = next(s for s in spans if s.name == "submit")
    assert root.parent_id == "" and root.service == "producer"
    # One trace: every span received (producer, both workers, every task) is in it.
    assert {s.trace_id for s in spans} == {root.trace_id}
    assert {s.service for s in spans} == {"producer", "w1", "w2"}
    by_id = {s.span_id: s for s in spans}
    nodes = named(spans, NODE)
    assert sorted(s.attributes["swarm.node.id"] for s in nodes) == sorted(envelopes)
    for node in nodes:
        chain = ancestors(node, by_id)
        assert chain[-1] == "submit" and "run/swarm.subagents" in chain
        assert node.attributes["gen_ai.operation.name"] == "invoke_agent"
        assert node.attributes["swarm.job.id"] == handle.id
        assert node.attributes["swarm.via"] == "live"
    aggregate = next(s for s in spans if s.name == "aggregate")
    assert ancestors(aggregate, by_id)[-1] == "submit"

    attempts = named(spans, ATTEMPT)
    # Every attempt's usage is what the ledger billed: per model, its calls and tokens.
    total = sum((usage_of(s) for s in attempts), Usage())
    assert len(attempts) == ledger["kimi-k2.5"].calls == 21  # 20 nodes and the aggregation
    assert total == ledger["kimi-k2.5"].usage
    # ... and per node, its attempts' usage is its envelope's.
    per_node: dict[str, Usage] = defaultdict(Usage)
    for attempt in attempts:
        parent = by_id[attempt.parent_id]
        key = parent.attributes.get("swarm.node.id", parent.name)
        per_node[key] = per_node[key] + usage_of(attempt)
    for node_id, env in envelopes.items():
        assert per_node[node_id] == env.usage, node_id
    for attempt in attempts:
        a = attempt.attributes
        assert a["gen_ai.operation.name"] == "chat"
        assert a["gen_ai.provider.name"] == "moonshot_ai"
        assert a["gen_ai.request.model"] == a["gen_ai.response.model"] == "kimi-k2.5"
        assert str(a["gen_ai.response.id"]).startswith("chatcmpl-")
        assert a["gen_ai.response.finish_reasons"] == ("stop",)
        assert a["server.address"] == "127.0.0.1"
        assert a["langfuse.observation.type"] == "generation"
        assert a["openinference.span.kind"] == "LLM"
        assert (
            a["llm.token_count.total"]
            == a["gen_ai.usage.input_tokens"] + a["gen_ai.usage.output_tokens"]
        )
        assert a["swarm.attempt"] == 1 and a["swarm.cost_usd"] > 0
    # No message content unless opted in, and never the key.
    assert not [s.name for s in spans if any(k in s.attributes for k in CONTENT_KEYS)]
    assert not [s.name for s in spans if any(API_KEY in str(v) for v in s.attributes.values())]


def test_message_content_only_when_opted_in(
    redis_server: Any, tmp_logs: Path, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    with traced_stack(redis_server, tmp_logs, Worker("w1", c=4)) as stack:
        client = stack.client()
        handle = client.submit(inputs(2, "captured"), "Summarise this document")
        report = handle.wait(timeout=60).to_dict()
        assert report["status"] == "succeeded", report.get("error")
        spans = receiver.wait_for(job_done(handle.id, 2), 30, "the job's spans")
        client.close()
    attempts = named(spans, ATTEMPT)
    assert len(attempts) == 3
    node_prompts = [s for s in attempts if "captured" in s.attributes["gen_ai.input.messages"]]
    assert len(node_prompts) == 2
    for attempt in attempts:
        assert attempt.attributes["output.value"]
        assert '"role": "assistant"' in attempt.attributes["gen_ai.output.messages"]
        assert not any(API_KEY in str(v) for v in attempt.attributes.values())


def test_a_killed_workers_nodes_continue_in_the_same_trace(
    redis_server: Any, tmp_logs: Path, receiver: Receiver
) -> None:
    lease = {"SWARM_LEASE_S": "2", "SWARM_NODE_TIMEOUT_S": "6"}
    w1 = Worker("w1", c=2, env={**lease, "OTEL_SERVICE_NAME": "w1"})
    w2 = Worker("w2", c=2, env={**lease, "OTEL_SERVICE_NAME": "w2"})
    with traced_stack(redis_server, tmp_logs, w1, w2, latency_ms=1000) as stack:
        client = stack.client()
        handle = client.submit(inputs(12, "kill"), "Summarise this document")
        node_ids = list(client.store.spec(handle.id).node_ids)
        victim = stack.workers[1]

        def held() -> set[str]:
            log = victim.log_text()
            open_ids = task_lines(log, handle.id, "received") - task_lines(
                log, handle.id, "succeeded"
            )
            done = {env.node_id for env in client.store.envelopes(handle.id)}
            return nodes_of(open_ids, handle.id, node_ids) - done

        wait_until(lambda: bool(held()), 60, "w2 running nodes")
        victim.kill()  # SIGKILL: its open spans are lost, its nodes taken over by w1
        taken = held()
        report = handle.wait(timeout=120).to_dict()
        assert report["status"] == "succeeded", report.get("error")
        spans = receiver.wait_for(job_done(handle.id, 12), 30, "the job's spans")
        client.close()

    root = next(s for s in spans if s.name == "submit")
    assert {s.trace_id for s in spans} == {root.trace_id}, [
        (s.name, s.service, s.parent_id) for s in spans if s.trace_id != root.trace_id
    ]
    continued = [s for s in named(spans, NODE) if s.attributes["swarm.node.id"] in taken]
    assert continued and {s.service for s in continued} == {"w1"}
    assert {s.attributes["swarm.node.id"] for s in continued} == taken
    assert Counter(s.attributes["swarm.node.status"] for s in continued)["ok"] == len(taken)


def test_a_batch_lines_node_span_covers_its_batch_and_names_it(
    redis_server: Any, tmp_logs: Path, receiver: Receiver
) -> None:
    sim = ["--batch-processing-s", "2", "--batch-one-model", "--batch-refused-field",
           "temperature", "--batch-refused-field", "top_p", "--seed", "5"]  # fmt: skip
    with running_stack(redis_server, tmp_logs, sim, [Worker("w1", c=4)]) as stack:
        client = stack.client()
        handle = client.submit(inputs(6, "batch"), "Extract x", deadline_s=600)
        report = handle.wait(timeout=120).to_dict()
        assert report["status"] == "succeeded", report.get("error")
        assert {node["via"] for node in report["nodes"]} == {"batch"}
        spans = receiver.wait_for(job_done(handle.id, 6), 30, "the job's spans")
        client.close()
    root = next(s for s in spans if s.name == "submit")
    assert {s.trace_id for s in spans} == {root.trace_id}
    by_id = {s.span_id: s for s in spans}
    nodes = named(spans, NODE)
    assert len(nodes) == 6 and {s.attributes["swarm.via"] for s in nodes} == {"batch"}
    (batch_id,) = {s.attributes["swarm.batch.id"] for s in nodes}
    assert batch_id
    for node in nodes:  # from the batch's creation, before the poll run that ingested it
        ingest = by_id[node.parent_id]
        assert ingest.name == "run/swarm.batch.poll"
        assert node.start_ns < ingest.start_ns and node.end_ns <= ingest.end_ns
