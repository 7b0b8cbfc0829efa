"""OpenTelemetry traces of jobs, with the GenAI semantic conventions (docs/tracing.md).

Off unless the standard ``OTEL_*`` environment configures an exporter (swarm.tracing.config);
``setup`` is called once by each process that submits or runs jobs (the client, the
workers). The hooks below are what the call path calls: with tracing off each is one
check of a module global that returns a shared no-op (no span object, no OpenTelemetry
import: a base install has no OpenTelemetry package at all). With tracing on they open
the spans of swarm.tracing.spans.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from swarm.catalog import Catalog, ModelSpec
from swarm.records import JobSpec
from swarm.tracing.config import TraceConfig, build_provider
from swarm.tracing.conventions import AttributeValue

if TYPE_CHECKING:
    from swarm.tracing.spans import Attempts, Tracing

__all__ = [
    "attached",
    "attempts",
    "batch_file",
    "capture",
    "carried",
    "enabled",
    "event",
    "job_step",
    "node",
    "node_ended",
    "resending",
    "reset",
    "setup",
    "shutdown",
    "submitting",
    "tool",
    "tool_ended",
    "use",
]

log = logging.getLogger(__name__)
_lock = threading.Lock()
_active: Tracing | None = None
"""The process's tracing once ``setup`` found it configured; None: off (every hook a no-op)."""
_set_up = False
_global_set = False
_NOTHING: AbstractContextManager[None] = nullcontext()
P = ParamSpec("P")
R = TypeVar("R")


def setup(service: str, environ: Mapping[str, str] | None = None) -> bool:
    """Turn tracing on for this process when the environment configures it (once; later
    calls return what the first decided): the SDK's tracer provider as the global one, and
    the Celery instrumentation (task spans, context in message headers). ``service`` names
    the process unless OTEL_SERVICE_NAME does. True when tracing is on."""
    global _active, _set_up, _global_set
    with _lock:
        if _set_up:
            return _active is not None
        _set_up = True
        env = os.environ if environ is None else environ
        config = TraceConfig.from_env(env)
        if not config.on:
            log.debug("swarm tracing: off (no OTEL_* exporter configured)")
            return False
        provider = build_provider(config, service, env)
        if provider is None:
            return False
        from opentelemetry import trace

        from swarm.tracing.spans import Tracing

        if not _global_set:
            trace.set_tracer_provider(provider)  # once per process (the API's rule)
            _global_set = True
        _instrument_celery(provider)
        _active = Tracing(provider, config.capture_content)
        log.debug("swarm tracing: on (%s), message content %s", ", ".join(config.exporters),
                  "captured" if config.capture_content else "not captured")  # fmt: skip
        return True


def use(provider: Any, *, capture_content: bool = False) -> None:
    """Trace into ``provider``, an SDK TracerProvider configured elsewhere (an application
    that sets OpenTelemetry up itself, tests), instead of reading the environment."""
    global _active, _set_up
    from swarm.tracing.spans import Tracing

    with _lock:
        _set_up = True
        _active = Tracing(provider, capture_content)


def _instrument_celery(provider: Any) -> None:
    try:
        from opentelemetry.instrumentation.celery import CeleryInstrumentor
    except ImportError:
        log.warning("swarm tracing: opentelemetry-instrumentation-celery is not installed: "
                    "no task spans, and each task's spans start under the job's stored "
                    "root only")  # fmt: skip
        return
    instrumentor = CeleryInstrumentor()  # type: ignore[no-untyped-call]
    if not instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.instrument(tracer_provider=provider)


def shutdown() -> None:
    """Export the spans still buffered and stop (a worker process's last act)."""
    global _active
    with _lock:
        active, _active = _active, None
    if active is not None:
        active.shutdown()


def reset() -> None:
    """Shut tracing down (spans flushed, Celery uninstrumented) so that the next ``setup``
    reads the environment again (tests)."""
    global _set_up
    shutdown()
    with _lock:
        _set_up = False
    try:
        from opentelemetry.instrumentation.celery import CeleryInstrumentor
    except ImportError:
        return
    instrumentor = CeleryInstrumentor()  # type: ignore[no-untyped-call]
    if instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.uninstrument()


def enabled() -> bool:
    """True while this process traces."""
    return _active is not None


def submitting(spec: JobSpec, operation: str = "submit") -> AbstractContextManager[JobSpec]:
    """The job's root span (``submit``); yields the spec to store, carrying the root's
    traceparent (unchanged when tracing is off)."""
    if _active is None:
        return nullcontext(spec)
    return _active.submit(spec, operation)


def job_step(spec: JobSpec, name: str, **attributes: AttributeValue) -> AbstractContextManager[Any]:
    """A span of the job's own work: ``fan_out``, ``aggregate``, ``reduce level N``."""
    if _active is None:
        return _NOTHING
    return _active.job_step(spec, name, {f"swarm.{k}": v for k, v in attributes.items()})


def resending(store: Any, job_id: str, reason: str) -> AbstractContextManager[Any]:
    """A span under the job's root around a message sent again from outside any task
    (a take-over's sweeper thread), so the message and its runs stay in the job's trace;
    no span when the job's spec cannot be read."""
    if _active is None:
        return _NOTHING
    try:
        spec = store.spec(job_id)
    except Exception as exc:  # the re-send goes on, outside the trace
        log.debug("swarm tracing: no spec for job %s (%s); %s not traced", job_id, exc, reason)
        return _NOTHING
    return _active.job_step(spec, reason, {"swarm.reason": reason})


def batch_file(batch_id: str | None, created_at: float | None) -> AbstractContextManager[Any]:
    """The nodes run in this block whose answer is a line of batch ``batch_id`` (via batch)
    get a span from ``created_at`` (its creation; now when unknown) with the batch id."""
    if _active is None or batch_id is None:
        return _NOTHING
    from swarm.tracing.spans import batch_context

    return batch_context(batch_id, created_at)


def node(
    spec: JobSpec, node_id: str, via: str = "live", start_time_ns: int | None = None
) -> AbstractContextManager[Any]:
    """The node's span (``invoke_agent sub-agent``); yields it (None when off) for
    ``node_ended``."""
    if _active is None:
        return _NOTHING
    return _active.node(spec, node_id, via, start_time_ns)


def node_ended(span: Any, envelope: Any, catalog: Catalog) -> None:
    """Put the node's outcome on its span (``span`` None: tracing is off)."""
    if span is not None:
        from swarm.tracing.spans import node_outcome

        node_outcome(span, envelope, catalog)


def attempts(
    catalog: Catalog, model: ModelSpec, earlier: int, base_url: str | None
) -> Attempts | None:
    """The attempt spans of one call, or None when off (the call path adds no step)."""
    if _active is None:
        return None
    return _active.attempts(catalog, model, earlier, base_url)


def tool(name: str, call_id: str) -> AbstractContextManager[Any]:
    """``execute_tool <name>``: one tool call of an agent node."""
    if _active is None:
        return _NOTHING
    return _active.tool(name, call_id)


def tool_ended(span: Any, error: bool, invalid: bool) -> None:
    """A tool call's outcome on its span (``span`` None: tracing is off)."""
    if span is not None and error:
        from swarm.tracing.spans import failed

        failed(span, "invalid_tool_call" if invalid else "tool_error")


def event(name: str, **attributes: AttributeValue) -> None:
    """An event (retry, pause, requeue, hedge, admission wait) on the current span."""
    if _active is not None:
        from swarm.tracing.spans import add_event

        add_event(name, {f"swarm.{k}": v for k, v in attributes.items()})


def waited(reason: str, seconds: float) -> None:
    """Admission made the current attempt wait: an event, and the attempt's
    ``swarm.admission.wait_s`` grows by ``seconds``."""
    if _active is not None:
        from swarm.tracing.spans import add_event, add_to

        add_event("admission wait", {"swarm.reason": reason, "swarm.wait_s": seconds})
        add_to("swarm.admission.wait_s", seconds)


def reused(slot: str) -> None:
    """The call's answer was one an earlier run stored: no attempt is made."""
    if _active is not None:
        from swarm.tracing import spans

        spans.reused(slot)


def capture() -> object | None:
    """The current trace context, to attach on another thread (None when off)."""
    if _active is None:
        return None
    from swarm.tracing.spans import capture as current

    return current()


def attached(ctx: object | None) -> AbstractContextManager[None]:
    """Run under a context ``capture`` took on another thread (None: as is)."""
    if ctx is None:
        return _NOTHING
    from swarm.tracing.spans import attached as attach

    return attach(ctx)  # type: ignore[arg-type]


def carried(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` run under the trace context current now (for another thread); ``fn`` itself
    when tracing is off."""
    if _active is None:
        return fn
    ctx = capture()

    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        with attached(ctx):
            return fn(*args, **kwargs)

    return run


def wrap_counted(
    name: str, take: Callable[[], bool], **attributes: AttributeValue
) -> Callable[[], bool]:
    """``take`` (a yes/no decision, e.g. a hedge taken), with an event named ``name`` on
    the current span each time it says yes; ``take`` itself when tracing is off."""
    if _active is None:
        return take

    def taken() -> bool:
        yes = take()
        if yes:
            event(name, **attributes)
        return yes

    return taken
