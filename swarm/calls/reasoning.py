"""A call whose reasoning used its whole cap: said, and asked once more with a larger cap.

A thinking model (kimi-k2.5 and DeepSeek with thinking on, OpenAI's reasoning models)
generates its reasoning first, inside ``max_tokens``: a cap too small for it ends the answer
with finish_reason ``length`` and no content. The gateway's answer is then an error of its
own kind (``reasoning_cut``, swarm.calls.gateway), never an empty success, and
``run_raising`` asks once more with the cap doubled, within the model's output limit and
what its context window leaves beside the prompt (logged at INFO: the request changed).
"""

from __future__ import annotations

import logging
from dataclasses import replace

from swarm.calls.pipeline import run_call
from swarm.calls.request import CallProgress, CallRequest, CallResult
from swarm.calls.runtime import Runtime
from swarm.records import ErrorKind

log = logging.getLogger(__name__)

RAISE_FACTOR = 2
"""A cut call is asked again with its cap times this (at most the model's limit)."""
PROMPT_MARGIN = 1.25
"""The prompt estimate times this is kept free of the cap in the model's window
(swarm.tokens estimates, the server counts)."""


def raised_cap(request: CallRequest) -> int | None:
    """The cap to ask again with, or None when the model has no room for a larger one."""
    model = request.model
    room = model.context_window - int(request.prompt_tokens * PROMPT_MARGIN)
    cap = min(request.max_tokens * RAISE_FACTOR, model.output_limit, room)
    return cap if cap > request.max_tokens else None


def run_raising(rt: Runtime, request: CallRequest) -> CallResult:
    """``run_call``, and once more with a raised cap when the answer's reasoning used the
    whole cap (both billed, their usage and attempts summed)."""
    result = run_call(rt, request)
    if result.error_kind is not ErrorKind.REASONING_CUT:
        return result
    cap = raised_cap(request)
    if cap is None:
        log.info(
            "call %s on %s: reasoning used the whole cap of %d tokens, which is the most "
            "the model allows here: not asked again",
            request.slot,
            request.model.name,
            request.max_tokens,
        )
        return result
    log.info(
        "call %s on %s: reasoning used the whole cap of %d tokens; asking again with max_tokens %d",
        request.slot,
        request.model.name,
        request.max_tokens,
        cap,
    )
    again = run_call(
        rt, replace(request, slot=f"{request.slot}:raised", max_tokens=cap, progress=CallProgress())
    )
    return replace(
        again,
        usage=result.usage + again.usage,
        attempts=result.attempts + again.attempts,
        latency_ms=result.latency_ms + again.latency_ms,
        billed=result.billed + again.billed,
    )
