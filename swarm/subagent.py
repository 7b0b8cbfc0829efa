"""One sub-agent node: load its input, call its model with retries, store the envelope.

Idempotent: a node whose ok envelope is stored (redelivery, duplicate message) returns it
without calling the gateway again, and the call itself runs inside a CallGuard
(swarm.idempotency: stored answers, claims, budget). It never raises for a gateway failure.
"""

from __future__ import annotations

from swarm.admission.gate import gate_for
from swarm.idempotency import CallGuard
from swarm.llm import AttemptHook, CallResult, call_once, call_with_retries
from swarm.prompts import subagent_messages
from swarm.records import ErrorKind, JobSpec, NodeEnvelope, Usage
from swarm.runtime import Runtime


def run_node(rt: Runtime, job_id: str, node_id: str, *, may_requeue: bool = False) -> NodeEnvelope:
    """Run (or reuse) one node and return its stored envelope.

    With ``may_requeue``, a long wait for admission raises swarm.errors.RetryLater (the
    task goes back to the queue) instead of sleeping in the task.
    """
    spec = rt.store.spec(job_id)
    stored = rt.store.envelope(job_id, node_id)
    if stored is not None and stored.ok:
        return stored
    if rt.store.cancelled(job_id):
        return _finish(rt, job_id, _cancelled(spec, node_id))
    model = rt.catalog.model(spec.model)
    messages = subagent_messages(
        spec.instruction, spec.input_ref(node_id), rt.store.input_text(job_id, node_id)
    )
    max_tokens = spec.max_tokens or model.max_tokens
    budgeted = spec.budget_usd is not None
    with CallGuard(rt, job_id, node_id, model, messages, max_tokens, budgeted) as guard:
        skipped = guard.skipped_envelope(spec, node_id)
        if skipped is not None:  # answered by an earlier run, or over budget: no call
            return _finish(rt, job_id, skipped)
        rt.store.mark_running(job_id, node_id, model.name)
        gate = gate_for(rt, model, job_id, messages, max_tokens, may_requeue=may_requeue)
        result = call_with_retries(
            guard.recorded(gate.wrap(lambda: call_once(rt.client, model, messages, max_tokens))),
            rt.settings,
            on_attempt=attempt_hook(rt, model.name),
        )
        envelope = envelope_of(spec, node_id, model.name, result)
        rt.listener.node_finished(
            model.name, envelope.ok, result.attempts, result.latency_ms / 1000
        )
        return _finish(rt, job_id, envelope)


def attempt_hook(rt: Runtime, model: str) -> AttemptHook:
    """Forward each attempt of a call on ``model`` to the runtime's listener."""

    def hook(kind: ErrorKind | None, usage: Usage, latency_s: float) -> None:
        rt.listener.attempt_finished(model, kind, usage, latency_s)

    return hook


def _finish(rt: Runtime, job_id: str, envelope: NodeEnvelope) -> NodeEnvelope:
    rt.store.finish_node(job_id, envelope)
    return rt.store.envelope(job_id, envelope.node_id) or envelope


def _cancelled(spec: JobSpec, node_id: str) -> NodeEnvelope:
    return NodeEnvelope(
        node_id=node_id,
        input_ref=spec.input_ref(node_id),
        model=spec.model,
        status="error",
        error_kind=ErrorKind.CANCELLED,
        error="job cancelled before this node called the gateway",
    )


def envelope_of(spec: JobSpec, node_id: str, model: str, result: CallResult) -> NodeEnvelope:
    """The envelope of a finished call, answered or not."""
    answer = result.answer
    return NodeEnvelope(
        node_id=node_id,
        input_ref=spec.input_ref(node_id),
        model=model,
        status="ok" if answer else "error",
        content=answer.content if answer else "",
        usage=result.usage,
        latency_ms=result.latency_ms,
        attempts=result.attempts,
        error_kind=result.error_kind,
        error=result.error,
        finish_reason=answer.finish_reason if answer else None,
    )
