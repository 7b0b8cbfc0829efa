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

from swarm.calls.request import Answer, CallProgress, CallResult
from swarm.calls.retry_policy import (
    BadResponseError,
    backoff_delay,
    classify,
    is_retryable,
    refusal_of,
    retry_after_of,
)
from swarm.errors import BackendHeldError, LeaseLostError, RetryLater
from swarm.records import ErrorKind, Usage
from swarm.store.durable import first_then
from swarm.store.outages import STORE_OUTAGES

log = logging.getLogger(__name__)

NOT_ATTEMPTS: tuple[type[Exception], ...] = (RetryLater, LeaseLostError, *STORE_OUTAGES)
"""Raised through the call loop: admission's requeue, a claim lost while frozen, and Redis
outages (swarm.errors)."""


class _WaitPolicy(wait_base):
    """tenacity adapter for swarm.calls.retry_policy.backoff_delay (Retry-After aware);
    ``earlier`` attempts of earlier runs count towards the exponent."""

    def __init__(self, cap_s: float, earlier: int = 0) -> None:
        self.cap_s = cap_s
        self.earlier = earlier

    def __call__(self, retry_state: RetryCallState) -> float:
        exc = retry_state.outcome.exception() if retry_state.outcome else None
        retry_after = retry_after_of(exc, time.time()) if exc else None
        attempt = self.earlier + retry_state.attempt_number
        return backoff_delay(attempt, retry_after, cap_s=self.cap_s)


def _transient(exc: BaseException) -> bool:
    return is_retryable(classify(exc))


def _before_retry(state: RetryCallState, on_retry: Callable[[], None]) -> None:
    exc = state.outcome.exception() if state.outcome else None
    log.debug(
        "retrying after attempt %d (%s: %s) in %.2f s",
        state.attempt_number,
        classify(exc) if exc else "?",
        one_line(exc) if exc else "",
        state.upcoming_sleep,
    )
    try:
        on_retry()
    except STORE_OUTAGES as exc:  # a count, never a reason to give the call up
        log.debug("retry not counted: %s", exc)


def billed_usage(exc: BaseException) -> Usage:
    """Usage an unusable 200 (no choices, no content) still carries; else zero."""
    if isinstance(exc, BadResponseError) and exc.usage:
        return exc.usage
    return Usage()


class _Counted:
    """``attempt`` counting its attempts (earlier runs' included) and the usage billed."""

    def __init__(self, attempt: Callable[[], Answer], earlier: int, max_attempts: int) -> None:
        self.attempt = attempt
        self.attempts = earlier
        self.max_attempts = max_attempts
        self.billed: list[Usage] = []

    def __call__(self) -> Answer:
        self.attempts += 1
        try:
            answer = self.attempt()
        except RetryLater as later:
            if not later.attempted:
                self.attempts -= 1  # admission refused before the request: not an attempt
            elif self.attempts >= self.max_attempts and later.__cause__ is not None:
                raise later.__cause__ from None  # no attempt left to requeue for
            raise
        except NOT_ATTEMPTS:
            raise
        except Exception as exc:
            if (usage := billed_usage(exc)) != Usage():
                self.billed.append(usage)
            raise
        self.billed.append(answer.usage)
        return answer


def call_with_retries(
    attempt: Callable[[], Answer],
    *,
    max_attempts: int,
    backoff_max_s: float,
    sleep: Callable[[float], None] = time.sleep,
    progress: CallProgress | None = None,
    on_retry: Callable[[], None] = lambda: None,
) -> CallResult:
    """Run ``attempt`` until it answers, a non-transient error occurs, or attempts run out.

    ``on_retry`` is told of each retry, before its backoff (the job's retry count).
    ``progress`` is what earlier runs of the call did (a task sent back to the queue):
    their attempts count against ``max_attempts`` and their time is in the latency. A
    RetryLater passing through carries the attempts and start time on for the next run;
    after the last attempt a long 429 pause does not requeue: the 429 is the result.
    """
    progress = progress or CallProgress()
    started_at = progress.started_at or time.time()
    counted = _Counted(attempt, progress.attempts, max_attempts)

    def loop() -> Retrying:
        return Retrying(
            stop=stop_after_attempt(max(max_attempts - progress.attempts, 1)),
            wait=_WaitPolicy(backoff_max_s, progress.attempts),
            retry=retry_if_exception(_transient),
            before_sleep=lambda state: _before_retry(state, on_retry),
            sleep=sleep,
            reraise=True,
        )

    answer: Answer | None = None
    kind: ErrorKind | None = None
    error: str | None = None
    try:
        answer = first_then(counted, loop)  # the loop is built only after a failed attempt
    except RetryLater as later:
        later.attempts, later.started_at = counted.attempts, started_at
        raise
    except NOT_ATTEMPTS:
        raise
    except Exception as exc:  # every failure becomes data; nothing raises into the chord
        kind, error = classify(exc), one_line(exc)
    billed = tuple(counted.billed)
    latency_ms = int((time.time() - started_at) * 1000)
    total = sum(billed, Usage())
    return CallResult(answer, total, counted.attempts, latency_ms, kind, error, billed)


def one_line(exc: BaseException) -> str:
    """``Type: message`` on one line, at most 300 characters; an HTTP refusal as its status,
    type and the provider's own message (``RateLimitError: HTTP 429
    exceeded_current_quota_error: Your account ...``); a held backend's message as is. An
    error that came from a request ends with the URL it went to (`` (calling URL)``): the
    worker's own gateway, which a report or `swarm status --node` read elsewhere would not
    show."""
    if isinstance(exc, BackendHeldError):
        return " ".join(str(exc).split())[:300]
    refusal = refusal_of(exc)
    detail = refusal.describe() if refusal is not None else " ".join(str(exc).split())
    text = f"{type(exc).__name__}: {detail or type(exc).__name__}"
    url = called_url(exc)
    if url is None:
        return text[:300]
    suffix = f" (calling {url[:200]})"
    return text[: 300 - len(suffix)] + suffix


def called_url(exc: BaseException) -> str | None:
    """Scheme, host, port and path of the request an openai error answers (no user, no
    password, no query: they may hold secrets); None for other errors."""
    try:
        url = getattr(exc, "request", None).url  # type: ignore[union-attr]
    except (AttributeError, RuntimeError):  # not a request's error, or httpx's unset request
        return None
    port = f":{url.port}" if url.port else ""
    return f"{url.scheme}://{url.host}{port}{url.path}"
