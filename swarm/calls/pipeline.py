"""One gateway call, end to end: its session, the retries, and the attempt path.

Every call a job makes goes through ``run_call`` with a slot name unique within the job,
so each is billed once, held to the job's budget and to the model's limits. The path is
chosen by the model's backend (``[backends.NAME] kind``). A hosted backend's call:

    session claim the slot; reuse a stored answer, or reserve the budget (session); an
            unbudgeted call asks admission for its first permit in the same round trip
    retry   attempts until an answer, a final error, or no attempts left (retries)
    health  the backend's holds: an empty balance or refused key fails the call unsent, a
            daily limit or a gateway outage pauses it unspent (backend_health)
    trace   a span per attempt, when tracing is on (swarm.tracing)
    listen  tell the listener of each attempt (metrics); never changes the outcome
    record  ledger line and stored answer as a billed response arrives (a plain node's own
            answer: held, and committed with its envelope in one script, HeldCall.commit)
    hedge   a duplicate request for a slow attempt, when hedging is on (hedging)
    admit   the model's shared limits for this attempt (admission); the first attempt
            starts from the permit asked with the claim, a held answer takes its finish
    fence   still the claim's holder, if a heartbeat's time went by since it was last known
    http    the request through the openai SDK, closed at the node timeout (gateway)

A local backend's call (swarm.calls.local) is sent no hedges (the server has a few slots),
and adds:

    admit   ... and permits held by requests read past their deadline, late answers taken
            (swarm.calls.local.gate); the backend's in-flight limit found from latency
            (swarm.calls.local.adaptive, applied by swarm.calls.admission.backend)
    pace    max_tokens fitted to the node timeout, said at WARNING (swarm.calls.local_steps)
    http    ... read past the node timeout for the overtime grace (swarm.calls.local.overtime)

``PATHS`` is that, as data; ``describe(kind)`` prints it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from swarm import tracing
from swarm.backends import BackendKind
from swarm.calls import local_steps as local
from swarm.calls import steps
from swarm.calls.admission.gate import Gate
from swarm.calls.admission.shares import Tenant
from swarm.calls.gateway import NO_KEY
from swarm.calls.local.gate import HoldingGate
from swarm.calls.request import Answer, CallRequest, CallResult
from swarm.calls.retries import call_with_retries
from swarm.calls.runtime import Runtime
from swarm.calls.session import CallSession
from swarm.calls.steps import Attempt, CallContext, StepFactory
from swarm.errors import RetryLater
from swarm.records import ErrorKind, Usage
from swarm.settings import KEY_VARIABLE
from swarm.store.billing import StoredAnswer


@dataclass(frozen=True)
class Path:
    """The attempt path of one backend kind: its steps (outermost first), the request at
    their end, its admission gate and what to do when the call ends."""

    steps: tuple[tuple[str, StepFactory], ...]
    transport: Callable[[CallContext], Attempt]
    gate: Callable[[Runtime, CallRequest], Gate]
    close: Callable[[CallContext], None] = lambda ctx: None
    ask_with_claim: bool = False
    """The first attempt's permit is asked as the claim's companion (an unbudgeted call:
    a budgeted one reserves its budget between the two)."""


_OUTER: tuple[tuple[str, StepFactory], ...] = (
    ("health", steps.guarding),
    ("trace", steps.tracing_attempts),
    ("listen", steps.listening),
    ("record", steps.recording),
)
_HOSTED: tuple[tuple[str, StepFactory], ...] = (
    *_OUTER,
    ("hedge", steps.hedging),
    ("admit", steps.admitting),
    ("fence", steps.fencing),
)


def _admission_of(rt: Runtime, request: CallRequest) -> dict[str, Any]:
    """The arguments of a call's gate: the model's limits, reserving the request's
    estimated tokens, and the settings' waits."""
    settings = rt.settings
    return {
        "controller": rt.admission,
        "spec": request.model,
        "job_id": request.job_id,
        "tokens": request.tokens,
        "tenant": Tenant(request.tenant, rt.catalog.tenant_weight(request.tenant)),
        "charge": request.prompt_tokens,
        "max_wait_s": settings.admission_max_wait_s,
        "max_countdown_s": settings.admission_max_countdown_s,
        "may_requeue": request.may_requeue,
        "reserve_s": settings.admission_reserve_s,
    }


def gate_for(rt: Runtime, request: CallRequest) -> Gate:
    """The admission gate of one call."""
    return Gate(**_admission_of(rt, request))


def holding_gate_for(rt: Runtime, request: CallRequest) -> Gate:
    """A local call's gate: ``gate_for``'s, holding the permits of abandoned requests."""
    return HoldingGate(**_admission_of(rt, request), abandoned=local.kit_of(rt).abandoned)


_LOCAL: tuple[tuple[str, StepFactory], ...] = (
    *_OUTER,  # a few slots: no hedges
    ("admit", steps.admitting_alone),
    ("fence", steps.fencing),
    ("pace", local.pacing),
)

PATHS: dict[BackendKind, Path] = {
    "hosted": Path(_HOSTED, steps.transport, gate_for, ask_with_claim=True),
    "local": Path(_LOCAL, local.transport, holding_gate_for, local.close),
}
"""The attempt path of each backend kind; the retry loop runs around its steps."""


def describe(kind: BackendKind = "hosted") -> list[str]:
    """The call path of ``kind`` as names, outermost first."""
    return ["session", "retry", *(name for name, _ in PATHS[kind].steps), "http"]


def build_attempt(ctx: CallContext, path: Path) -> Attempt:
    """The attempt path of one call: each applicable step wrapped around the next."""
    attempt = path.transport(ctx)
    for _, factory in reversed(path.steps):
        step = factory(ctx)
        if step is not None:
            attempt = _bind(step, attempt)
    return attempt


def _bind(step: steps.Step, next: Attempt) -> Attempt:
    def bound(request: CallRequest) -> Answer:
        return step(request, next)

    return bound


def path_of(rt: Runtime, request: CallRequest) -> Path:
    """The path of the request's backend kind."""
    return PATHS[rt.catalog.backend_of(request.model).kind]


def keyless_auth(result: CallResult, api_key: str, variable: str = KEY_VARIABLE) -> CallResult:
    """An auth failure names the key's ``variable`` first: no key was sent (the gateway's
    own text, 'incorrect API key', would point at a key that was never set), or the one
    in ``variable`` was refused."""
    if result.error_kind is not ErrorKind.AUTH:
        return result
    hint = f"no API key was sent (set {variable})" if api_key == NO_KEY else (
        f"the gateway refused the key in {variable}"
    )  # fmt: skip
    return replace(result, error=f"{hint}: {result.error or ''}")


def key_variable(rt: Runtime, request: CallRequest) -> str:
    """The variable the key of the request's backend is read from (swarm.calls.gateway:
    its ``api_key_env`` when it has a base URL of its own, else SWARM_API_KEY)."""
    backend = rt.catalog.backend_of(request.model)
    if backend.base_url is not None and backend.api_key_env:
        return backend.api_key_env
    return KEY_VARIABLE


def run_call(rt: Runtime, request: CallRequest) -> CallResult:
    """Call the request's model (with retries) for its slot, or reuse what an earlier run
    got; a refused budget reservation means no call. A held answer comes back in
    ``CallResult.held`` for the caller to commit with its node's envelope."""
    path = path_of(rt, request)
    gate = path.gate(rt, request)
    first = gate.ask_later() if path.ask_with_claim and not request.budgeted else None
    with CallSession(rt, request, first, gate.give_back) as session:
        if (stored := session.reused) is not None:
            tracing.reused(request.slot)
            return _reused(stored)
        if session.refused:
            return CallResult(None, Usage(), 0, 0, ErrorKind.BUDGET_EXCEEDED, "budget reached")
        result = _attempts(rt, request, path, CallContext(rt, session, gate))
        return replace(result, held=session.held)


def _reused(stored: StoredAnswer) -> CallResult:
    """The result of an answer an earlier run stored."""
    answer = Answer(
        stored.content,
        stored.usage,
        stored.finish_reason,
        stored.usage_missing,
        stored.tool_calls,
        max_tokens_sent=stored.max_tokens_sent,
        reasoning=stored.reasoning,
    )
    return CallResult(answer, stored.usage, stored.attempts, stored.latency_ms, reused=True)


def _attempts(rt: Runtime, request: CallRequest, path: Path, ctx: CallContext) -> CallResult:
    """The attempts of the call (retried until an answer, a final error or none left)."""
    attempt = build_attempt(ctx, path)
    try:
        result = call_with_retries(
            lambda: attempt(request),
            max_attempts=rt.settings.max_attempts,
            backoff_max_s=rt.settings.backoff_max_s,
            progress=request.progress,
            on_retry=partial(rt.store.count_retry, request.job_id, request.model.name),
        )
        api_key = rt.client_for(request.model.backend).api_key
        return keyless_auth(result, api_key, key_variable(rt, request))
    except RetryLater as later:
        later.slot = request.slot  # the task carries this call's progress to its next run
        raise
    finally:
        path.close(ctx)
