"""One guarded gateway call: idempotency and budget (CallGuard), admission (gate), retries.

Every call a job makes (a sub-agent, a context summary, a JSON fix-up, the planner, a
reduce step, the aggregation) goes through ``guarded_call`` with a slot name unique within
the job, so each is billed once, held to the job's budget and to the model's limits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from swarm.admission.gate import Gate, gate_for
from swarm.catalog import ModelSpec
from swarm.hedging.race import HedgedCall
from swarm.idempotency import CallGuard
from swarm.llm import Answer, AttemptHook, Message, call_once, call_with_retries, request_body
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
    hedge_cap: int = 0,
) -> Outcome:
    """Call ``model`` once (with retries) for ``slot``, or reuse what an earlier run got.

    ``hedge_cap`` > 0 lets each attempt be hedged (swarm.hedging) when the runtime hedges,
    within the job's cap of that many hedges."""
    with CallGuard(
        rt, job_id, slot, model, messages, max_tokens, budgeted, closing=closing
    ) as guard:
        if (stored := guard.reused) is not None:
            answer = Answer(
                stored.content, stored.usage, stored.finish_reason, stored.usage_missing
            )
            return Outcome(answer, stored.usage, stored.attempts, stored.latency_ms)
        if guard.refused:
            return Outcome(None, Usage(), 0, 0, ErrorKind.BUDGET_EXCEEDED, "budget reached")
        gate = gate_for(rt, model, job_id, messages, max_tokens, may_requeue=may_requeue)
        attempt = gate.wrap(
            lambda: call_once(rt.client, model, messages, max_tokens, json_mode=json_mode)
        )
        if rt.hedger is not None and hedge_cap > 0:
            body = request_body(model, messages, max_tokens, json_mode=json_mode)
            call = hedged_call(rt, guard, gate, model, body, hedge_cap)
            attempt = partial(rt.hedger.attempt, call, attempt)
        result = call_with_retries(
            guard.recorded(attempt),
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


def hedged_call(
    rt: Runtime, guard: CallGuard, gate: Gate, model: ModelSpec, body: dict[str, Any], cap: int
) -> HedgedCall:
    """What the hedger needs of one call: its request, admission, cap and ledger."""
    job_id = guard.job_id
    hook = attempt_hook(rt, model.name)

    def bill(usage: Usage) -> None:
        guard.bill(usage)
        hook(None, usage, 0.0)  # metrics count a billed loser like any billed attempt

    return HedgedCall(
        job_id=job_id,
        model=model.name,
        body=body,
        gate=gate,
        bill=bill,
        on_hedge_won=partial(rt.store.hedge_won, job_id),
        take_hedge=partial(rt.store.take_hedge, job_id, cap),
    )


def attempt_hook(rt: Runtime, model: str) -> AttemptHook:
    """Forward each attempt of a call on ``model`` to the runtime's listener."""

    def hook(kind: ErrorKind | None, usage: Usage, latency_s: float) -> None:
        rt.listener.attempt_finished(model, kind, usage, latency_s)

    return hook
