"""One guarded gateway call: idempotency and budget (CallGuard), admission (gate), retries.

Every call a job makes (a sub-agent, a context summary, a JSON fix-up, the planner, a
reduce step, the aggregation) goes through ``guarded_call`` with a slot name unique within
the job, so each is billed once, held to the job's budget and to the model's limits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from swarm.admission.gate import gate_for
from swarm.catalog import ModelSpec
from swarm.idempotency import CallGuard
from swarm.llm import Answer, AttemptHook, Message, call_once, call_with_retries
from swarm.records import ErrorKind, Usage
from swarm.runtime import Runtime


@dataclass(frozen=True)
class Outcome:
    """What a guarded call produced."""

    answer: Answer | None
    """The answer (fresh or reused), or None."""
    usage: Usage
    """Tokens billed by this call (a reused answer's original usage)."""
    attempts: int
    """Gateway attempts (of the original run, for a reused answer)."""
    latency_ms: int
    """Wall time of the call."""
    error_kind: ErrorKind | None = None
    """Why there is no answer."""
    error: str | None = None
    """One line on why there is no answer."""


def guarded_call(
    rt: Runtime,
    job_id: str,
    slot: str,
    model: ModelSpec,
    messages: Sequence[Message],
    max_tokens: int,
    *,
    budgeted: bool,
    json_mode: bool = False,
    closing: bool = False,
    may_requeue: bool = False,
) -> Outcome:
    """Call ``model`` once (with retries) for ``slot``, or reuse what an earlier run got."""
    with CallGuard(
        rt, job_id, slot, model, messages, max_tokens, budgeted, closing=closing
    ) as guard:
        if (stored := guard.reused) is not None:
            answer = Answer(stored.content, stored.usage, stored.finish_reason)
            return Outcome(answer, stored.usage, stored.attempts, stored.latency_ms)
        if guard.refused:
            return Outcome(None, Usage(), 0, 0, ErrorKind.BUDGET_EXCEEDED, "budget reached")
        gate = gate_for(rt, model, job_id, messages, max_tokens, may_requeue=may_requeue)
        result = call_with_retries(
            guard.recorded(
                gate.wrap(
                    lambda: call_once(rt.client, model, messages, max_tokens, json_mode=json_mode)
                )
            ),
            rt.settings,
            on_attempt=attempt_hook(rt, model.name),
        )
    return Outcome(
        result.answer,
        result.usage,
        result.attempts,
        result.latency_ms,
        result.error_kind,
        result.error,
    )


def attempt_hook(rt: Runtime, model: str) -> AttemptHook:
    """Forward each attempt of a call on ``model`` to the runtime's listener."""

    def hook(kind: ErrorKind | None, usage: Usage, latency_s: float) -> None:
        rt.listener.attempt_finished(model, kind, usage, latency_s)

    return hook
