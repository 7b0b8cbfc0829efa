"""One gateway call, end to end: the guard around it, the retries, and the attempt path.

Every call a job makes goes through ``run_call`` with a slot name unique within the job,
so each is billed once, held to the job's budget and to the model's limits:

    guard   claim the slot; reuse a stored answer, or reserve the budget (idempotency)
    retry   attempts until an answer, a final error, or no attempts left (retries)
    listen  tell the listener of each attempt (metrics); never changes the outcome
    record  ledger line and stored answer the moment a billed response arrives
    hedge   a duplicate request for a slow attempt, when hedging is on (hedging)
    admit   the model's shared limits for this attempt (admission)
    fence   still the claim's holder, if a heartbeat's time went by since it was last known
    http    the request (gateway)

``ATTEMPT_PATH`` is that order, as data; ``describe()`` prints it.
"""

from __future__ import annotations

from swarm.calls import steps
from swarm.calls.admission.gate import Gate
from swarm.calls.idempotency import CallGuard
from swarm.calls.request import Answer, CallRequest, CallResult
from swarm.calls.retries import call_with_retries
from swarm.calls.runtime import Runtime
from swarm.calls.steps import Attempt, CallContext, StepFactory
from swarm.errors import RetryLater
from swarm.records import ErrorKind, Usage

ATTEMPT_PATH: tuple[tuple[str, StepFactory], ...] = (
    ("listen", steps.listening),
    ("record", steps.recording),
    ("hedge", steps.hedging),
    ("admit", steps.admitting),
    ("fence", steps.fencing),
)
"""The steps of one attempt, outermost first; the retry loop runs around them and the
HTTP request ends the path."""


def describe() -> list[str]:
    """The call path as names, outermost first."""
    return ["guard", "retry", *(name for name, _ in ATTEMPT_PATH), "http"]


def build_attempt(ctx: CallContext, last: Attempt) -> Attempt:
    """The attempt path of one call: each applicable step wrapped around the next."""
    attempt = last
    for _, factory in reversed(ATTEMPT_PATH):
        step = factory(ctx)
        if step is not None:
            attempt = _bind(step, attempt)
    return attempt


def _bind(step: steps.Step, next: Attempt) -> Attempt:
    def bound(request: CallRequest) -> Answer:
        return step(request, next)

    return bound


def gate_for(rt: Runtime, request: CallRequest) -> Gate:
    """The admission gate of one call, reserving the request's estimated tokens."""
    settings = rt.settings
    return Gate(
        rt.admission,
        request.model,
        request.job_id,
        request.tokens,
        max_wait_s=settings.admission_max_wait_s,
        max_countdown_s=settings.admission_max_countdown_s,
        may_requeue=request.may_requeue,
        reserve_s=settings.admission_reserve_s,
        abandoned=rt.abandoned,
    )


def run_call(rt: Runtime, request: CallRequest) -> CallResult:
    """Call the request's model (with retries) for its slot, or reuse what an earlier run
    got; a refused budget reservation means no call."""
    with CallGuard(rt, request) as guard:
        if (stored := guard.reused) is not None:
            answer = Answer(
                stored.content,
                stored.usage,
                stored.finish_reason,
                stored.usage_missing,
                stored.tool_calls,
            )
            return CallResult(answer, stored.usage, stored.attempts, stored.latency_ms, reused=True)
        if guard.refused:
            return CallResult(None, Usage(), 0, 0, ErrorKind.BUDGET_EXCEEDED, "budget reached")
        ctx = CallContext(rt, guard, gate_for(rt, request))
        attempt = build_attempt(ctx, steps.transport(ctx))
        try:
            return call_with_retries(
                lambda: attempt(request),
                max_attempts=rt.settings.max_attempts,
                backoff_max_s=rt.settings.backoff_max_s,
                progress=request.progress,
                budget_spent=lambda: ctx.gate.budget_spent,
            )
        except RetryLater as later:
            later.slot = request.slot  # the task carries this call's progress to its next run
            raise
        finally:
            if (unused := ctx.late.close()) is not None:  # came after the last attempt
                answer, latency_s = unused
                steps.bill_late(ctx, request.model.name, answer.usage, latency_s)
