"""The retry loop around a call's attempts: tenacity, driven by swarm.calls.retry_policy.

Every failure becomes data (a CallResult with its error kind); only admission's requeue
and Redis outages pass through, because neither is an attempt of the call.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt
from tenacity.wait import wait_base

from swarm.calls.request import Answer, CallResult
from swarm.calls.retry_policy import (
    BadResponseError,
    backoff_delay,
    classify,
    is_retryable,
    retry_after_of,
)
from swarm.errors import STORE_OUTAGES, RetryLater
from swarm.records import ErrorKind, Usage

log = logging.getLogger(__name__)

NOT_ATTEMPTS: tuple[type[Exception], ...] = (RetryLater, *STORE_OUTAGES)
"""Raised through the call loop: admission's requeue, and Redis outages (swarm.errors)."""


class _WaitPolicy(wait_base):
    """tenacity adapter for swarm.calls.retry_policy.backoff_delay (Retry-After aware)."""

    def __init__(self, cap_s: float) -> None:
        self.cap_s = cap_s

    def __call__(self, retry_state: RetryCallState) -> float:
        exc = retry_state.outcome.exception() if retry_state.outcome else None
        retry_after = retry_after_of(exc, time.time()) if exc else None
        return backoff_delay(retry_state.attempt_number, retry_after, cap_s=self.cap_s)


def _transient(exc: BaseException) -> bool:
    return is_retryable(classify(exc))


def _log_retry(state: RetryCallState) -> None:
    exc = state.outcome.exception() if state.outcome else None
    log.debug(
        "retrying after attempt %d (%s) in %.2f s",
        state.attempt_number,
        classify(exc) if exc else "?",
        state.upcoming_sleep,
    )


def billed_usage(exc: BaseException) -> Usage:
    """Usage an unusable 200 (no choices, no content) still carries; else zero."""
    if isinstance(exc, BadResponseError) and exc.usage:
        return exc.usage
    return Usage()


def call_with_retries(
    attempt: Callable[[], Answer],
    *,
    max_attempts: int,
    backoff_max_s: float,
    sleep: Callable[[float], None] = time.sleep,
) -> CallResult:
    """Run ``attempt`` until it answers, a non-transient error occurs, or attempts run out."""
    started = time.perf_counter()
    billed: list[Usage] = []
    attempts = 0

    def counted() -> Answer:
        nonlocal attempts
        attempts += 1
        try:
            answer = attempt()
        except NOT_ATTEMPTS:
            raise
        except Exception as exc:
            if (usage := billed_usage(exc)) != Usage():
                billed.append(usage)
            raise
        billed.append(answer.usage)
        return answer

    retrying = Retrying(
        stop=stop_after_attempt(max_attempts),
        wait=_WaitPolicy(backoff_max_s),
        retry=retry_if_exception(_transient),
        before_sleep=_log_retry,
        sleep=sleep,
        reraise=True,
    )
    answer: Answer | None = None
    kind: ErrorKind | None = None
    error: str | None = None
    try:
        answer = retrying(counted)
    except NOT_ATTEMPTS:
        raise
    except Exception as exc:  # every failure becomes data; nothing raises into the chord
        kind, error = classify(exc), one_line(exc)
    total = sum(billed, Usage())
    latency_ms = int((time.perf_counter() - started) * 1000)
    return CallResult(answer, total, attempts, latency_ms, kind, error, tuple(billed))


def one_line(exc: BaseException) -> str:
    """``Type: message`` on one line, at most 300 characters."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:300]
