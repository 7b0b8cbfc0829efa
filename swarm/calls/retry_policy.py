"""Retry decisions as pure functions: classify an error, decide, and compute the delay.

The call loop (swarm.calls.gateway) and the Celery adapters only apply what these return.
"""

from __future__ import annotations

import email.utils
import random
from collections.abc import Callable, Mapping

import openai

from swarm.calls.provider_errors import Refusal, read_refusal
from swarm.errors import BackendHeldError
from swarm.records import ErrorKind, Usage

RETRYABLE: frozenset[ErrorKind] = frozenset(
    {
        ErrorKind.RATE_LIMITED,
        ErrorKind.TIMEOUT,
        ErrorKind.SERVER_ERROR,
        ErrorKind.CONNECTION,
        ErrorKind.BAD_RESPONSE,
        ErrorKind.OVERLOADED,
    }
)
"""Transient kinds: 408/409/429/5xx, timeouts, dropped connections, unparsable bodies, an
overloaded provider. A quota, daily-limit or content-filter refusal is not transient
(swarm.calls.provider_errors): no retry can succeed before a person or the day acts."""

MAX_RETRY_AFTER_S = 60.0
"""A Retry-After longer than this is treated as this (the node's deadline still applies)."""


class BadResponseError(Exception):
    """A 2xx answer we cannot use: not JSON, no choices, no message content."""

    def __init__(
        self, message: str, usage: Usage | None = None, kind: ErrorKind = ErrorKind.BAD_RESPONSE
    ) -> None:
        super().__init__(message)
        self.usage = usage
        """What the gateway billed for this answer, when its body had a usage field."""
        self.kind = kind
        """How it is classified: ``bad_response`` (retried), or ``reasoning_cut`` (an
        answer whose reasoning used the whole cap: the same request would be cut again)."""


def _status_kind(status: int) -> ErrorKind:
    if status == 429:
        return ErrorKind.RATE_LIMITED
    if status in (408,):
        return ErrorKind.TIMEOUT
    if status in (401, 403):
        return ErrorKind.AUTH
    if status == 404:
        return ErrorKind.NOT_FOUND
    if status >= 500 or status == 409:
        return ErrorKind.SERVER_ERROR
    return ErrorKind.BAD_REQUEST


def refusal_of(exc: BaseException) -> Refusal | None:
    """The provider's refusal an HTTP status error carries (None for any other error)."""
    if isinstance(exc, openai.APIStatusError):
        return read_refusal(exc.status_code, exc.body)
    return None


def classify(exc: BaseException) -> ErrorKind:
    """The ErrorKind of an exception raised by a gateway call: an HTTP refusal by its status
    and its body's type, code and message (swarm.calls.provider_errors)."""
    if isinstance(exc, BackendHeldError):
        return ErrorKind(exc.kind)
    if isinstance(exc, openai.APITimeoutError):
        return ErrorKind.TIMEOUT
    if isinstance(exc, openai.APIConnectionError):
        return ErrorKind.CONNECTION
    if isinstance(exc, openai.APIStatusError):
        refusal = read_refusal(exc.status_code, exc.body)
        if refusal.kind is not None:
            return refusal.kind
        kind = _status_kind(exc.status_code)
        if kind is ErrorKind.BAD_REQUEST and _mentions_context(exc):
            return ErrorKind.CONTEXT_OVERFLOW
        return kind
    if isinstance(exc, BadResponseError):
        return exc.kind
    if isinstance(exc, openai.APIResponseValidationError | ValueError):
        return ErrorKind.BAD_RESPONSE
    return ErrorKind.INTERNAL


def _mentions_context(exc: openai.APIStatusError) -> bool:
    text = str(exc).lower()
    return "context" in text and ("length" in text or "window" in text or "exceed" in text)


def is_retryable(kind: ErrorKind) -> bool:
    """True for transient kinds, worth another attempt."""
    return kind in RETRYABLE


def parse_retry_after(headers: Mapping[str, str], now: float) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``retry-after`` (seconds or HTTP date).

    Returns None when absent or unparsable; never negative; capped at MAX_RETRY_AFTER_S.
    """
    lowered = {k.lower(): v for k, v in headers.items()}
    seconds = _parse_ms(lowered.get("retry-after-ms"))
    if seconds is None:
        seconds = _parse_seconds_or_date(lowered.get("retry-after"), now)
    if seconds is None:
        return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S)


def _parse_ms(value: str | None) -> float | None:
    try:
        return float(value) / 1000.0 if value is not None else None
    except ValueError:
        return None


def _parse_seconds_or_date(value: str | None, now: float) -> float | None:
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return when.timestamp() - now


def headers_of(exc: BaseException) -> dict[str, str]:
    """The response headers of an openai status error ({} for any other error)."""
    if isinstance(exc, openai.APIStatusError):
        return dict(exc.response.headers)
    return {}


def retry_after_of(exc: BaseException, now: float) -> float | None:
    """Retry-After carried by an openai status error, if any."""
    return parse_retry_after(headers_of(exc), now)


def backoff_delay(
    attempt: int,
    retry_after_s: float | None,
    *,
    base_s: float = 0.5,
    cap_s: float = 20.0,
    rand: Callable[[], float] = random.random,
) -> float:
    """Seconds to sleep after failed attempt number ``attempt`` (1-based).

    Exponential backoff with full jitter (uniform in [0, min(cap, base * 2**(attempt-1))]),
    never sooner than the gateway's Retry-After.
    """
    ceiling = min(cap_s, base_s * 2.0 ** max(attempt - 1, 0))
    jittered = rand() * ceiling
    return max(jittered, retry_after_s or 0.0)
