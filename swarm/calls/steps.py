"""The steps of one gateway attempt, each ``step(request, next) -> Answer``.

A step does its part and hands the request on to ``next`` (the rest of the path), in the
spirit of httpx transports and dramatiq middleware. Each factory here builds its step for
one call from that call's ``CallContext``, or returns None when the step does not apply
to the call. The order they run in is declared once per backend kind, in
swarm.calls.pipeline; the steps a local backend adds are in swarm.calls.local_steps.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from swarm import tracing
from swarm.calls.admission.gate import Gate
from swarm.calls.backend_health import wait_for
from swarm.calls.gateway import send
from swarm.calls.hedging.race import HedgedCall
from swarm.calls.listeners import safely
from swarm.calls.request import Answer, CallRequest
from swarm.calls.retries import NOT_ATTEMPTS, billed_usage
from swarm.calls.retry_policy import classify
from swarm.calls.runtime import Runtime
from swarm.calls.session import CallSession
from swarm.errors import RetryLater
from swarm.records import ErrorKind, Usage

log = logging.getLogger(__name__)

Attempt = Callable[[CallRequest], Answer]
"""The rest of the path from a step on: sends the request, returns the answer."""
Step = Callable[[CallRequest, Attempt], Answer]
"""One step: ``step(request, next)``."""


@dataclass(frozen=True)
class CallContext:
    """What the steps of one call share: the process runtime, the call's session (claim,
    budget, ledger) and its admission gate."""

    rt: Runtime
    session: CallSession
    gate: Gate

    def tell(self, kind: ErrorKind | None, usage: Usage, latency_s: float) -> None:
        """Tell the runtime's listener of an attempt; a listener that raises is logged and
        changes nothing (the answer is billed and recorded already)."""
        model = self.session.request.model.name
        safely(self.rt.listener.attempt_finished, model, kind, usage, latency_s)


StepFactory = Callable[[CallContext], Step | None]


def guarding(ctx: CallContext) -> Step:
    """Holds of the request's backend (swarm.calls.backend_health): a held backend's call
    fails unsent, a paused one's waits (in the task, or back in the queue; a daily limit
    that resets after the job's deadline fails it at once); an attempt's
    error that holds or pauses the backend is recorded, and one that met a pause is not
    spent (the step tries again once the pause ends)."""
    health = ctx.rt.health

    def deadline_of(job_id: str) -> float | None:
        return ctx.rt.store.spec(job_id).deadline_at

    def guard(request: CallRequest, next: Attempt) -> Answer:
        backend, call = request.model.backend, f"{request.job_id}:{request.slot}"
        while True:
            probing = wait_for(health, request, ctx.gate, partial(deadline_of, request.job_id))
            try:
                answer = next(request)
            except NOT_ATTEMPTS:
                raise
            except Exception as exc:
                if health.failed(backend, call, exc):
                    continue
                raise
            health.answered(backend, probing)
            return answer

    return guard


def tracing_attempts(ctx: CallContext) -> Step | None:
    """A span per attempt (``chat <model>``, swarm.tracing) covering its admission wait,
    hedges and request; no step at all while tracing is off."""
    if not tracing.enabled():
        return None
    request = ctx.session.request
    base_url = str(ctx.rt.client_for(request.model.backend).base_url)
    spans = tracing.attempts(ctx.rt.catalog, request.model, request.progress.attempts,
                             base_url)  # fmt: skip
    assert spans is not None

    def trace(request: CallRequest, next: Attempt) -> Answer:
        answer: Answer = spans.run(request, next, _judged)
        return answer

    return trace


def _judged(exc: BaseException) -> tuple[str | None, Usage]:
    """An attempt's exception as its span tells it: the error kind and billed usage, or no
    kind for what is no attempt (RetryLater before a request, a lost claim, the store
    down). A 429 that sends the task back to the queue is the 429's (RetryLater from it)."""
    if isinstance(exc, RetryLater) and exc.attempted and exc.__cause__ is not None:
        return _judged(exc.__cause__)
    if isinstance(exc, NOT_ATTEMPTS):
        return None, Usage()
    return str(classify(exc)), billed_usage(exc)


def listening(ctx: CallContext) -> Step:
    """Tells the listener how each attempt ended: answered (its usage) or its error kind."""

    def listen(request: CallRequest, next: Attempt) -> Answer:
        started = time.perf_counter()
        try:
            answer = next(request)
        except NOT_ATTEMPTS:
            raise
        except Exception as exc:
            ctx.tell(classify(exc), billed_usage(exc), time.perf_counter() - started)
            raise
        ctx.tell(None, answer.usage, time.perf_counter() - started)
        return answer

    return listen


def recording(ctx: CallContext) -> Step:
    """Records each billed response in the ledger (and its answer under the call's key) the
    moment it arrives, before anything else can fail (a held answer, CallSession.held: with
    its node's envelope); counts each 429 for the job's report whether or not admission is
    on."""

    def count_429(request: CallRequest) -> None:
        ctx.rt.store.count_rate_limited(request.job_id, request.model.name)

    def record(request: CallRequest, next: Attempt) -> Answer:
        try:
            return ctx.session.recorded(partial(next, request))()
        except RetryLater as later:
            if later.attempted:  # a 429 whose Retry-After sends the task back to the queue
                count_429(request)
            raise
        except NOT_ATTEMPTS:
            raise
        except Exception as exc:
            if classify(exc) is ErrorKind.RATE_LIMITED:
                count_429(request)
            raise

    return record


def hedging(ctx: CallContext) -> Step | None:
    """Races a duplicate request against a slow one (swarm.calls.hedging) when the process
    hedges and the call may be hedged: each request goes on down the path (admit, fence,
    http) as a leg of the race."""
    rt, request = ctx.rt, ctx.session.request
    if rt.hedger is None or request.hedge_cap <= 0:
        return None
    hedger = rt.hedger
    call = hedged_call(ctx, request.hedge_cap)

    def hedge(request: CallRequest, next: Attempt) -> Answer:
        return hedger.attempt(call, request, next)

    return hedge


def admitting(ctx: CallContext) -> Step:
    """Holds the attempt to the model's shared limits: waits, or sends the task back to the
    queue (RetryLater), then reports how the attempt went (tokens, 429s). The first attempt
    starts from the permit asked with the call's claim; an answer held for its node's
    envelope takes its permit's finish along (CallSession.ride_with_answer). A hedge
    (swarm.calls.hedging) is sent only if the model has room at once."""
    gate, session = ctx.gate, ctx.session

    def admit(request: CallRequest, next: Attempt) -> Answer:
        if (leg := request.leg) is not None and leg.duplicate:  # a hedge: room now, or none
            return leg.admit(partial(next, request))
        first = session.first_permit()
        ride = session.ride_with_answer if leg is None else None  # a race's legs: finished now
        return gate.admitted(partial(next, request), first, ride)

    return admit


def admitting_alone(ctx: CallContext) -> Step:
    """``admitting`` by the gate alone (a local backend's: swarm.calls.local.gate)."""

    def admit(request: CallRequest, next: Attempt) -> Answer:
        return ctx.gate.call(partial(next, request))

    return admit


def fencing(ctx: CallContext) -> Step:
    """Right before the request: LeaseLostError when the process was frozen or cut off long
    enough for its claim to lapse and be taken (CallSession.still_held): never two calls for
    one slot at once, whatever the process was doing when it stopped."""

    def fence(request: CallRequest, next: Attempt) -> Answer:
        ctx.session.still_held()
        return next(request)

    return fence


def transport(ctx: CallContext) -> Attempt:
    """The end of the path: the HTTP request through the openai client of the model's
    backend (the process's client unless the backend has a base URL of its own), closed at
    the node timeout by the HTTP client's read timeout; a hedged attempt's request goes
    through its leg, which can withdraw it (swarm.calls.hedging.race)."""
    rt = ctx.rt

    def http(request: CallRequest) -> Answer:
        if request.leg is not None:  # a hedged attempt's: a request that can be withdrawn
            return request.leg.send(request)
        return send(rt.client_for(request.model.backend), request)

    return http


def hedged_call(ctx: CallContext, cap: int) -> HedgedCall:
    """What the hedger needs of one call: its admission, cap and ledger."""
    rt, session = ctx.rt, ctx.session
    job_id = session.request.job_id

    def bill(usage: Usage) -> None:
        session.bill(usage)
        ctx.tell(None, usage, 0.0)  # metrics count a billed loser like any billed attempt

    return HedgedCall(
        job_id=job_id,
        model=session.request.model.name,
        gate=ctx.gate,
        bill=bill,
        on_hedge_won=partial(rt.store.hedge_won, job_id),
        take_hedge=tracing.wrap_counted(
            "hedge", partial(rt.store.take_hedge, job_id, cap), reason="slow attempt"
        ),
    )
