"""The steps a local backend's calls add to the path (swarm.calls.pipeline), on the state
of the process's local kit (``Runtime.local``, swarm.calls.local.kit).

pace      the completion budget fitted to the node timeout (swarm.calls.local.pacing): a
          request whose asked answer the server cannot generate in time is sent a smaller
          ``max_tokens``, logged at WARNING and recorded (``Answer.max_tokens_sent``); its
          answer's latency and usage feed the model's pace
overtime  the HTTP request read past the node's deadline (swarm.calls.local.overtime): the
          server goes on computing it, and its late answer is the call's next answer
          (swarm.calls.local.late) or billed as unused
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from functools import partial

from swarm.calls.gateway import send
from swarm.calls.listeners import safely
from swarm.calls.local.gate import HoldingGate
from swarm.calls.local.kit import LocalKit
from swarm.calls.request import Answer, CallRequest
from swarm.calls.retries import billed_usage
from swarm.calls.retry_policy import classify
from swarm.calls.runtime import Runtime
from swarm.calls.steps import Attempt, CallContext, Step
from swarm.errors import ConfigError
from swarm.records import ErrorKind, Usage

log = logging.getLogger(__name__)


def kit_of(rt: Runtime) -> LocalKit:
    """The process's local kit: a call takes the local steps only when its backend is
    local, and a Runtime whose catalog has a local backend has one (swarm.calls.local.kit)."""
    if rt.local is None:
        raise ConfigError(
            "a local backend's call in a Runtime without a LocalKit (swarm.calls.local.kit)"
        )
    return rt.local


def _gate(ctx: CallContext) -> HoldingGate:
    gate = ctx.gate
    assert isinstance(gate, HoldingGate), "a local call's gate holds permits (gate_for)"
    return gate


def pacing(ctx: CallContext) -> Step:
    """Caps the request's completion to what the model generates within the node timeout
    (say so at WARNING, and in the answer's ``max_tokens_sent``); feeds each answer's
    latency to the model's pace, and each timeout to its loss cap."""
    rt, pacing = ctx.rt, kit_of(ctx.rt).pacing

    def pace(request: CallRequest, next: Attempt) -> Answer:
        sent = paced(rt, request)
        started = time.perf_counter()
        try:
            answer = next(sent)
        except Exception as exc:
            if classify(exc) is ErrorKind.TIMEOUT:
                pacing.timed_out(request.model.name, request.model.backend, sent.max_tokens)
            raise
        if not answer.usage_missing:  # its usage and latency go into the model's pace
            usage, model = answer.usage, request.model
            pacing.answered(model.name, model.backend, usage.prompt_tokens - usage.cached_tokens,
                            usage.completion_tokens, time.perf_counter() - started,
                            rt.settings.node_timeout_s)  # fmt: skip
        if sent.max_tokens != request.max_tokens:
            return replace(answer, max_tokens_sent=sent.max_tokens)
        return answer

    return pace


def paced(rt: Runtime, request: CallRequest) -> CallRequest:
    """The request as sent: its max_tokens capped when the model's measured speed says the
    asked answer would not end within the node timeout (the idempotency key and admission
    keep the caller's max_tokens)."""
    model = request.model.name
    prompt = int(request.prompt_tokens * rt.windows.scale(model))
    deadline_s = rt.settings.node_timeout_s
    pace = kit_of(rt).pacing.pace(model, request.model.backend)
    budget = pace.budget(prompt, request.max_tokens, deadline_s)
    if budget >= request.max_tokens:
        return request
    log.warning("pacing: %s is sent max_tokens %d instead of %d: %s", model, budget,
                request.max_tokens, pace.explain(prompt, deadline_s))  # fmt: skip
    return replace(request, max_tokens=budget)


def transport(ctx: CallContext) -> Attempt:
    """The end of a local call's path: the HTTP request, handed to an overtime thread. A
    request unanswered at the node timeout raises the timeout as always (a StillReading,
    whose permit the gate holds), but keeps reading for the overtime grace: an answer that
    comes then is the call's next answer or billed as unused (``late_answer``)."""
    rt, overtime = ctx.rt, kit_of(ctx.rt).overtime
    deadline_s = rt.settings.node_timeout_s

    def http(request: CallRequest) -> Answer:
        client = rt.client_for(request.model.backend)
        return overtime.send(partial(send, client, request), deadline_s,
                                partial(late_answer, ctx, request))  # fmt: skip

    return http


def late_answer(ctx: CallContext, request: CallRequest, outcome: Answer | BaseException,
                latency_s: float) -> None:  # fmt: skip
    """A request that ended after its node's deadline. An answer while the call still runs
    is kept for its next attempt, which takes it instead of asking again. Otherwise what
    the gateway billed goes to the ledger like a hedge loser's (``CallSession.bill``: counted
    once by its call id, never stored as the call's answer, so a run that lost its claim
    still counts it) and to the listener (metrics). Not to the model's pace: its latency is
    mostly time queued behind other requests at a server that kept computing what its
    clients had left."""
    late = _gate(ctx).late
    if not isinstance(outcome, Answer):
        late.failed()
    elif late.offer(outcome, latency_s):
        log.debug("overtime: %s answered %.1f s after it was sent: kept for the call's next "
                  "attempt", request.model.name, latency_s)  # fmt: skip
        return
    usage = outcome.usage if isinstance(outcome, Answer) else billed_usage(outcome)
    bill_late(ctx, request.model.name, usage, latency_s)


def bill_late(ctx: CallContext, model: str, usage: Usage, latency_s: float) -> None:
    """A late response no attempt used: billed in the ledger, told to the listener."""
    if usage == Usage():
        log.debug("overtime: %s ended late with nothing billed", model)
        return
    log.debug("overtime: %s answered %.1f s after it was sent, billed %s", model, latency_s,
              usage)  # fmt: skip
    ctx.session.bill(usage)
    safely(ctx.rt.listener.late_answer, model, usage, latency_s)


def close(ctx: CallContext) -> None:
    """The call has ended: a late answer kept and never taken is billed as unused."""
    if (unused := _gate(ctx).late.close()) is not None:
        answer, latency_s = unused
        bill_late(ctx, ctx.session.request.model.name, answer.usage, latency_s)
