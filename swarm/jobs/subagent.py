"""One sub-agent node: fit its input, call its model (then fallbacks), store the envelope.

Idempotent: a node whose ok envelope is stored (redelivery, duplicate message) returns it
without calling the gateway again, and every call runs through swarm.calls.pipeline.run_call
(stored answers, budget, admission). It never raises for a gateway failure: failures are
error envelopes.

Per node (swarm.records.NodeTask): the model chosen by kind and its fallbacks, tried in
turn when one keeps failing after its retries (each one a swarm.jobs.model_run.ModelRun:
input fitted to its window, call, schema check). A plain node's answer, held by its call,
is committed with the envelope in one write (swarm.calls.request.HeldCall).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from swarm import tracing
from swarm.calls.listeners import safely
from swarm.calls.request import CallProgress, HeldCall
from swarm.calls.retry_policy import RETRYABLE
from swarm.calls.runtime import Runtime
from swarm.jobs.model_run import SUMMARIZE_KIND, ModelRun, Tally
from swarm.records import ErrorKind, JobSpec, NodeEnvelope
from swarm.store.leases import Lease

FALLBACK_KINDS: frozenset[ErrorKind] = RETRYABLE | {
    ErrorKind.NOT_FOUND,
    ErrorKind.BAD_OUTPUT,
    ErrorKind.INSUFFICIENT_BALANCE,
    ErrorKind.AUTH,
    ErrorKind.DAILY_LIMIT,
    ErrorKind.OUTAGE,
}
"""Errors after which the next model of the node's kind is tried (a backend that is held
fails a next model of its own at once, unsent: swarm.calls.backend_health)."""

log = logging.getLogger(__name__)

__all__ = ["SUMMARIZE_KIND", "NodeCall", "call_node", "cancel_node", "run_node"]


@dataclass(frozen=True)
class NodeCall:
    """How a run calls a node's model, beside the node itself (run_node, call_node)."""

    may_requeue: bool = False
    """A long wait for admission raises swarm.errors.RetryLater (the task goes back to the
    queue) instead of sleeping in the task."""
    progress: Mapping[str, CallProgress] = field(default_factory=dict)
    """What the runs before such a requeue did, per call slot."""
    fence: Lease | None = None
    """The lease of the task running the node: lost, the envelope is not stored (another
    run took over)."""
    via: Literal["live", "batch"] = "live"
    """``batch``: the answer stored under the node's key came from a batch file
    (swarm.batch), so an ok envelope says so."""


IN_TASK = NodeCall()
"""A call that waits for admission in the task, unfenced, live."""


def run_node(rt: Runtime, job_id: str, node_id: str, call: NodeCall = IN_TASK) -> NodeEnvelope:
    """Run (or reuse) one node and return its stored envelope."""
    spec = rt.store.spec(job_id)
    stored = rt.store.envelope(job_id, node_id)
    if stored is not None and stored.ok:
        return stored
    if rt.store.cancelled(job_id):
        return cancel_node(rt, spec, node_id)
    text = rt.store.input_text(job_id, node_id)
    rt.store.mark_running(job_id, node_id, spec.task(node_id).model)
    return call_node(rt, spec, node_id, text, call)


def call_node(
    rt: Runtime, spec: JobSpec, node_id: str, text: str, call: NodeCall = IN_TASK
) -> NodeEnvelope:
    """Call a node's model (then its fallbacks) on ``text`` and store its envelope; the
    caller has checked that no ok envelope is stored and marked the node running."""
    with tracing.node(spec, node_id, call.via) as span:  # a no-op while tracing is off
        envelope = _call_node(rt, spec, node_id, text, call)
        tracing.node_ended(span, envelope, rt.catalog)
        return envelope


def _call_node(rt: Runtime, spec: JobSpec, node_id: str, text: str, call: NodeCall) -> NodeEnvelope:
    job_id = spec.job_id
    task = spec.task(node_id)
    tally = Tally()
    try:
        envelope = _envelope(rt, spec, node_id, text, tally, call)
    except BaseException:
        if tally.held is not None:  # the answer held for the envelope: written alone now
            tally.held.commit()
        raise
    if call.via != "live" and envelope.ok and envelope.model == task.model:
        envelope = envelope.model_copy(update={"via": call.via})
    seconds = envelope.latency_ms / 1000
    safely(rt.listener.node_finished, envelope.model, envelope.ok, envelope.attempts, seconds)
    return _finish(rt, job_id, envelope, call.fence, tally.held)


def _envelope(
    rt: Runtime,
    spec: JobSpec,
    node_id: str,
    text: str,
    tally: Tally,
    call: NodeCall,
) -> NodeEnvelope:
    """The node's envelope on its model, then on each fallback while one is worth trying."""
    task = spec.task(node_id)
    envelope: NodeEnvelope | None = None
    for position, name in enumerate(task.models()):
        model = rt.catalog.model(name)
        run = ModelRun(rt, spec, node_id, task, model, call.may_requeue, call.progress)
        envelope = run.envelope(text, node_id if position == 0 else f"{node_id}@{name}", tally)
        if envelope.ok or envelope.error_kind not in FALLBACK_KINDS:
            break
        log.debug("node %s: %s on %s, falling back", node_id, envelope.error_kind, name)
    assert envelope is not None  # a task has at least one model
    return envelope


def cancel_node(rt: Runtime, spec: JobSpec, node_id: str) -> NodeEnvelope:
    """End a node of a cancelled job without calling the gateway."""
    return _finish(rt, spec.job_id, _cancelled(spec, node_id))


def _finish(
    rt: Runtime,
    job_id: str,
    envelope: NodeEnvelope,
    fence: Lease | None = None,
    held: HeldCall | None = None,
) -> NodeEnvelope:
    if held is not None:
        stored = held.commit(envelope, fence)
    else:
        stored = rt.store.finish_node(job_id, envelope, fence)
    if stored:
        return envelope
    if fence is not None:
        log.debug("node %s: lease lost, envelope left to the run that took over", envelope.node_id)
    return rt.store.envelope(job_id, envelope.node_id) or envelope


def _cancelled(spec: JobSpec, node_id: str) -> NodeEnvelope:
    return NodeEnvelope(
        node_id=node_id,
        input_ref=spec.input_ref(node_id),
        model=spec.task(node_id).model,
        status="error",
        error_kind=ErrorKind.CANCELLED,
        error="job cancelled before this node called the gateway",
    )
