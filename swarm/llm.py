"""Calling the gateway: one shared openai client per process, one call, and the retry loop.

The SDK's own retries are off (max_retries=0) so every retry passes through our policy
(swarm.retry_policy) and, later, through admission control. Timeouts are enforced by the
HTTP client, because Celery's threads pool ignores task time limits.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx2
import openai
from openai.types.chat import ChatCompletion
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt
from tenacity.wait import wait_base

from swarm.catalog import ModelSpec
from swarm.errors import STORE_OUTAGES, RetryLater
from swarm.records import ErrorKind, Usage
from swarm.retry_policy import (
    BadResponseError,
    backoff_delay,
    classify,
    is_retryable,
    retry_after_of,
)
from swarm.settings import Settings

Message = dict[str, str]
NOT_ATTEMPTS: tuple[type[Exception], ...] = (RetryLater, *STORE_OUTAGES)
"""Raised through the call loop: admission's requeue, and Redis outages (swarm.errors)."""


@dataclass(frozen=True)
class Answer:
    """A usable answer from the gateway."""

    content: str
    usage: Usage
    finish_reason: str | None
    usage_missing: bool = False
    """True when the answer had no usage field (its tokens are unknown, counted as 0)."""


@dataclass(frozen=True)
class CallResult:
    """The outcome of a call after its retries: an answer, or the last error."""

    answer: Answer | None
    """The answer when a call succeeded."""
    usage: Usage
    """Tokens billed over all attempts (answered ones, and unusable 200s carrying usage)."""
    attempts: int
    """Attempts made."""
    latency_ms: int
    """Wall time, backoff included."""
    error_kind: ErrorKind | None = None
    """Kind of the last error when no answer came."""
    error: str | None = None
    """One line about the last error."""
    billed: tuple[Usage, ...] = field(default_factory=tuple)
    """Usage of each billed attempt, in order."""


def make_client(settings: Settings, base_url: str, api_key: str) -> openai.OpenAI:
    """One client per process: pooled keep-alive connections, SDK retries off."""
    timeout = httpx2.Timeout(settings.node_timeout_s, connect=settings.connect_timeout_s)
    http = openai.DefaultHttpxClient(
        timeout=timeout,
        verify=settings.verify_tls,
        limits=httpx2.Limits(
            max_connections=settings.http_pool_size,
            max_keepalive_connections=settings.http_pool_size,
            keepalive_expiry=30.0,
        ),
    )
    return openai.OpenAI(
        base_url=base_url, api_key=api_key, max_retries=0, timeout=timeout, http_client=http
    )


def call_once(
    client: openai.OpenAI,
    spec: ModelSpec,
    messages: Sequence[Message],
    max_tokens: int,
    *,
    json_mode: bool = False,
) -> Answer:
    """One chat completion (JSON mode: ``response_format`` json_object); raises openai
    errors or BadResponseError.

    Sent with the SDK's documented low-level ``client.post`` (same auth, timeouts, error
    types and typed ``ChatCompletion``) rather than ``chat.completions.create``, whose
    TypedDict transform of plain string messages cost about 0.8 ms of CPU per call, a
    third of the SDK's share at hundreds of calls per second (measured, issue 8).
    """
    completion = client.post(
        "/chat/completions",
        body=request_body(spec, messages, max_tokens, json_mode=json_mode),
        cast_to=ChatCompletion,
    )
    return answer_of(completion)


def request_body(
    spec: ModelSpec, messages: Sequence[Message], max_tokens: int, *, json_mode: bool = False
) -> dict[str, Any]:
    """The JSON body of one chat completion request."""
    body: dict[str, Any] = {
        "model": spec.gateway_name,
        "messages": list(messages),
        "max_tokens": max_tokens,
        "temperature": 0.2,
    }
    if json_mode:
        body["response_format"] = {"type": "json_object"}
    return body


def answer_of(completion: Any) -> Answer:
    """The usable answer in a chat completion; BadResponseError (with any billed usage)
    when it has none."""
    if not hasattr(completion, "choices"):
        raise BadResponseError(f"not a chat completion: {str(completion)[:80]!r}")
    billed = _usage_of(completion) if getattr(completion, "usage", None) else None
    if not completion.choices:
        raise BadResponseError("answer has no choices", billed)
    choice = completion.choices[0]
    content = choice.message.content if choice.message else None
    if content is None:
        raise BadResponseError("answer has no message content", billed)
    return Answer(
        content=content,
        usage=_usage_of(completion),
        finish_reason=choice.finish_reason,
        usage_missing=getattr(completion, "usage", None) is None,
    )


def _usage_of(completion: Any) -> Usage:
    usage = getattr(completion, "usage", None)
    if usage is None:
        return Usage()
    details = getattr(usage, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) or 0
    return Usage(
        prompt_tokens=usage.prompt_tokens or 0,
        completion_tokens=usage.completion_tokens or 0,
        cached_tokens=cached,
    )


class _WaitPolicy(wait_base):
    """tenacity adapter for swarm.retry_policy.backoff_delay (Retry-After aware)."""

    def __init__(self, cap_s: float) -> None:
        self.cap_s = cap_s

    def __call__(self, retry_state: RetryCallState) -> float:
        exc = retry_state.outcome.exception() if retry_state.outcome else None
        retry_after = retry_after_of(exc, time.time()) if exc else None
        return backoff_delay(retry_state.attempt_number, retry_after, cap_s=self.cap_s)


def _transient(exc: BaseException) -> bool:
    return is_retryable(classify(exc))


AttemptHook = Callable[[ErrorKind | None, Usage, float], None]


def _no_hook(kind: ErrorKind | None, usage: Usage, latency_s: float) -> None:
    return None


def call_with_retries(
    call: Callable[[], Answer],
    settings: Settings,
    *,
    sleep: Callable[[float], None] = time.sleep,
    on_attempt: AttemptHook = _no_hook,
) -> CallResult:
    """Run ``call`` until it answers, a non-transient error occurs, or attempts run out.

    ``on_attempt(error_kind, usage, latency_s)`` is told of every HTTP attempt.
    """
    started = time.perf_counter()
    billed: list[Usage] = []
    attempts = 0

    def attempt() -> Answer:
        nonlocal attempts
        attempts += 1
        t0 = time.perf_counter()
        try:
            answer = call()
        except NOT_ATTEMPTS:  # back to the queue (admission), or Redis is down: not attempts
            raise
        except Exception as exc:
            # An unusable 200 (no choices, no content) may still be billed: count its usage.
            usage = exc.usage if isinstance(exc, BadResponseError) and exc.usage else Usage()
            if usage != Usage():
                billed.append(usage)
            on_attempt(classify(exc), usage, time.perf_counter() - t0)
            raise
        billed.append(answer.usage)
        on_attempt(None, answer.usage, time.perf_counter() - t0)
        return answer

    retrying = Retrying(
        stop=stop_after_attempt(settings.max_attempts),
        wait=_WaitPolicy(settings.backoff_max_s),
        retry=retry_if_exception(_transient),
        sleep=sleep,
        reraise=True,
    )
    answer: Answer | None = None
    kind: ErrorKind | None = None
    error: str | None = None
    try:
        answer = retrying(attempt)
    except NOT_ATTEMPTS:
        raise
    except Exception as exc:  # every failure becomes data; nothing raises into the chord
        kind, error = classify(exc), _one_line(exc)
    total = sum(billed, Usage())
    latency_ms = int((time.perf_counter() - started) * 1000)
    return CallResult(answer, total, attempts, latency_ms, kind, error, tuple(billed))


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:300]
