"""The spans of a job, made only while tracing is on (swarm.tracing builds this module's
``Tracing`` then; a base install never imports it).

One trace per job: the producer's ``submit`` span is the root and its context is stored in
the job's spec (``JobSpec.trace_parent``, a W3C traceparent). Celery task spans come from
opentelemetry-instrumentation-celery, which carries the context in the message headers; a
node, aggregation or reduce span is a child of the task's span when that span is in the
job's trace, else (a message sent by a process that does not trace, a take-over) of the
stored root: every worker's spans of one job land in one trace.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from swarm.catalog import Catalog, ModelSpec
from swarm.cost.pricing import cost_usd
from swarm.records import JobSpec, Usage
from swarm.tracing import conventions as conv

log = logging.getLogger(__name__)
_PROPAGATOR = TraceContextTextMapPropagator()
TRACEPARENT = "traceparent"
_BATCH = "swarm.batch"
"""Context key of the batch whose lines the nodes run now (id, creation in ns)."""


class Tracing:
    """The process's tracer and what its spans need."""

    def __init__(self, provider: TracerProvider, capture_content: bool) -> None:
        self.provider = provider
        self.tracer = provider.get_tracer("swarm")
        self.capture_content = capture_content

    # -- the job's root and its context -------------------------------------------------
    @contextmanager
    def submit(self, spec: JobSpec, operation: str) -> Iterator[JobSpec]:
        """The job's root span; yields ``spec`` carrying its traceparent."""
        attributes = {**_job_attributes(spec), "swarm.nodes": len(spec.node_ids),
                      "swarm.model": spec.model}  # fmt: skip
        with self.tracer.start_as_current_span(
            operation, context=otel_context.Context(), attributes=attributes
        ) as span:
            carrier: dict[str, str] = {}
            _PROPAGATOR.inject(carrier)
            span.set_attribute("swarm.trace_parent", carrier.get(TRACEPARENT, ""))
            yield spec.model_copy(update={"trace_parent": carrier.get(TRACEPARENT)})

    def job_parent(self, spec: JobSpec) -> otel_context.Context | None:
        """The context a span of ``spec`` starts under: None (the current one) when the
        current span is in the job's trace or the job stored none, else the stored root."""
        stored = getattr(spec, "trace_parent", None)
        if not stored:
            return None
        current = trace.get_current_span().get_span_context()
        parent = _PROPAGATOR.extract({TRACEPARENT: stored})
        root = trace.get_current_span(parent).get_span_context()
        if current.is_valid and current.trace_id == root.trace_id:
            return None
        return parent

    def job_step(
        self, spec: JobSpec, name: str, attributes: Mapping[str, conv.AttributeValue]
    ) -> AbstractContextManager[Span]:
        """A span of the job (fan-out, aggregation, a reduce level) under its trace. An
        exception ending it is named by its type only (``_ended_by``): its text may quote
        what the job sent."""
        attributes = {**_job_attributes(spec), **attributes}
        return self._span(name, context=self.job_parent(spec), attributes=attributes)

    # -- nodes --------------------------------------------------------------------------
    def node(
        self, spec: JobSpec, node_id: str, via: str, start_time_ns: int | None = None
    ) -> AbstractContextManager[Span]:
        """``invoke_agent sub-agent``: one run of a node (a requeued node has a span per
        run, each in the job's trace). ``start_time_ns``: a batch line's span starts at its
        file's upload."""
        attributes: dict[str, conv.AttributeValue] = {
            **_job_attributes(spec),
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": conv.AGENT_NAME,
            "openinference.span.kind": "AGENT",
            "swarm.node.id": node_id,
            "swarm.via": via,
        }
        batch = otel_context.get_value(_BATCH) if via == "batch" else None
        if isinstance(batch, tuple):
            attributes["swarm.batch.id"] = batch[0]
            start_time_ns = start_time_ns or batch[1]
        return self._span(
            f"invoke_agent {conv.AGENT_NAME}", context=self.job_parent(spec),
            attributes=attributes, start_time=start_time_ns,
        )  # fmt: skip

    # -- gateway attempts ---------------------------------------------------------------
    def attempts(
        self, catalog: Catalog, model: ModelSpec, earlier: int, base_url: str | None
    ) -> Attempts:
        """The attempt spans of one call (``earlier``: attempts its earlier runs made)."""
        provider = conv.provider_name(catalog, model)
        return Attempts(self, model, provider, conv.server_address(base_url), earlier)

    # -- tools and events ---------------------------------------------------------------
    def tool(self, name: str, call_id: str) -> AbstractContextManager[Span]:
        """``execute_tool <name>``: one tool call of an agent node (the tool's own errors
        are its outcome, swarm.tracing.tool_ended)."""
        attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
                      "gen_ai.tool.call.id": call_id, "openinference.span.kind": "TOOL",
                      "tool.name": name}  # fmt: skip
        return self._span(f"execute_tool {name}", attributes=attributes, kind=SpanKind.INTERNAL)

    @contextmanager
    def _span(self, name: str, **options: Any) -> Iterator[Span]:
        """A span under the current context; an exception ending it is named by its type
        only (``_ended_by``): its text may quote what the job sent."""
        with self.tracer.start_as_current_span(
            name, record_exception=False, set_status_on_exception=False, **options
        ) as span:
            try:
                yield span
            except Exception as exc:
                _ended_by(span, exc)
                raise

    def shutdown(self) -> None:
        """Export what is buffered, then stop (a worker's last act)."""
        self.provider.force_flush()
        self.provider.shutdown()


@dataclass(eq=False)
class Attempts:
    """``chat <model>`` spans of one call, one per HTTP attempt (its admission wait and
    hedges included)."""

    tracing: Tracing = field(repr=False)
    model: ModelSpec
    provider: str
    server: str | None
    number: int
    """Attempts made so far (the call's earlier ones included)."""
    last_error: str | None = field(init=False, default=None)

    def run(
        self,
        request: Any,
        send: Callable[[Any], Any],
        judge: Callable[[BaseException], tuple[str | None, Usage]],
    ) -> Any:
        """``send(request)`` in an attempt span. ``judge`` names an exception's error kind
        and billed usage; kind None: the exception is no attempt (sent back to the queue,
        claim lost, store down): an event, not an error."""
        self.number += 1
        number = self.number
        attributes = {
            **conv.request_attributes(self.model, self.provider, request.max_tokens,
                                      self.server),
            "swarm.job.id": request.job_id, "swarm.call.slot": request.slot,
            "swarm.tenant": request.tenant, "swarm.attempt": number,
        }  # fmt: skip
        if self.tracing.capture_content:
            attributes.update(conv.input_messages(request.messages))
        if self.last_error is not None:  # this attempt is a retry of the one before
            trace.get_current_span().add_event(
                "retry", {"swarm.attempt": number, "swarm.reason": self.last_error}
            )
        with self.tracing.tracer.start_as_current_span(
            f"chat {self.model.gateway_name}", kind=SpanKind.CLIENT, attributes=attributes,
            record_exception=False, set_status_on_exception=False,
        ) as span:  # fmt: skip
            try:
                answer = send(request)
            except Exception as exc:
                kind, billed = judge(exc)
                self.last_error = kind
                if kind is not None:
                    self._failed(span, kind, billed, exc)
                if kind is None or hasattr(exc, "delay_s"):
                    _ended_by(span, exc)  # no attempt, or the task goes back to the queue
                raise
            self.last_error = None
            self._answered(span, answer)
            return answer

    def _answered(self, span: Span, answer: Any) -> None:
        span.set_attributes(conv.usage_attributes(answer.usage))
        span.set_attributes(conv.response_attributes(
            getattr(answer, "response_model", None) or self.model.gateway_name,
            getattr(answer, "response_id", None), answer.finish_reason,
        ))  # fmt: skip
        span.set_attribute("swarm.cost_usd", cost_usd(self.model, answer.usage))
        if self.tracing.capture_content:
            span.set_attributes(conv.output_messages(answer.content, answer.finish_reason))

    def _failed(self, span: Span, kind: str, billed: Usage, exc: BaseException) -> None:
        failed(span, kind)
        if billed.total_tokens:  # an unusable answer the gateway billed all the same
            span.set_attributes(conv.usage_attributes(billed))
            span.set_attribute("swarm.cost_usd", cost_usd(self.model, billed))
        span.add_event("error", {"exception.type": type(exc).__name__})


def _ended_by(span: Span, exc: BaseException) -> None:
    """A span left by an exception: a requeue (RetryLater) is an event with its reason and
    delay, anything else an error."""
    delay = getattr(exc, "delay_s", None)
    if delay is not None:
        span.add_event("requeue", {"swarm.reason": str(getattr(exc, "reason", "")),
                                   "swarm.delay_s": float(delay)})  # fmt: skip
        span.set_attribute("swarm.requeued", True)
        return
    span.set_attribute("error.type", type(exc).__name__)
    span.set_status(Status(StatusCode.ERROR, type(exc).__name__))


def failed(span: Span, kind: str) -> None:
    """``span`` ended in an error of ``kind``."""
    span.set_attribute("error.type", kind)
    span.set_status(Status(StatusCode.ERROR, kind))


def _job_attributes(spec: JobSpec) -> dict[str, conv.AttributeValue]:
    return {"swarm.job.id": spec.job_id, "swarm.tenant": spec.tenant}


def node_outcome(span: Span, envelope: Any, catalog: Catalog) -> None:
    """What a node ended with: status, error kind, attempts, usage over all its calls
    (``swarm.usage.*``: the attempt spans carry ``gen_ai.usage.*``) and cost."""
    usage: Usage = envelope.usage
    span.set_attributes({
        "swarm.node.status": envelope.status, "swarm.model": envelope.model,
        "swarm.attempts": envelope.attempts, "swarm.via": envelope.via,
        "swarm.usage.input_tokens": usage.prompt_tokens,
        "swarm.usage.output_tokens": usage.completion_tokens,
    })  # fmt: skip
    if envelope.model in catalog.models:
        span.set_attribute("swarm.cost_usd", cost_usd(catalog.model(envelope.model), usage))
    if envelope.error_kind is not None:
        failed(span, str(envelope.error_kind))


def finished_attributes(span: Any) -> Mapping[str, Any]:
    """A span's attributes so far (tests, and adding to a running total)."""
    return dict(span.attributes or {}) if isinstance(span, ReadableSpan) else {}


def add_event(name: str, attributes: Mapping[str, conv.AttributeValue]) -> None:
    """An event on the current span (none: nothing)."""
    span = trace.get_current_span()
    if span.is_recording():
        span.add_event(name, dict(attributes))


def add_to(name: str, amount: float) -> None:
    """Add ``amount`` to a numeric attribute of the current span."""
    span = trace.get_current_span()
    if span.is_recording():
        known = finished_attributes(span).get(name, 0.0)
        span.set_attribute(name, float(known) + amount)


def batch_context(batch_id: str, created_at: float | None) -> AbstractContextManager[None]:
    """The block runs with ``batch_id`` (and its creation time) in the trace context: the
    nodes it runs via batch, on any thread ``capture`` hands the context to, read it."""
    started = int(created_at * 1e9) if created_at is not None else None
    return attached(otel_context.set_value(_BATCH, (batch_id, started)))


def capture() -> otel_context.Context:
    return otel_context.get_current()


@contextmanager
def attached(ctx: otel_context.Context) -> Iterator[None]:
    token = otel_context.attach(ctx)
    try:
        yield
    finally:
        otel_context.detach(token)


def reused(slot: str) -> None:
    add_event("reused answer", {"swarm.call.slot": slot})
    span = trace.get_current_span()
    if span.is_recording():
        span.set_attribute("swarm.reused_answer", True)
