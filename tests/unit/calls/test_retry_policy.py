from __future__ import annotations

import email.utils

import httpx2
import openai
import pytest

from swarm.calls.retry_policy import (
    BadResponseError,
    backoff_delay,
    classify,
    is_retryable,
    parse_retry_after,
    retry_after_of,
)
from swarm.records import ErrorKind

REQUEST = httpx2.Request("POST", "http://gw/v1/chat/completions")
NOW = 1_800_000_000.0


def status_error(status: int, headers: dict[str, str] | None = None, msg: str = "x") -> Exception:
    response = httpx2.Response(status, headers=headers or {}, request=REQUEST)
    cls = {
        400: openai.BadRequestError,
        401: openai.AuthenticationError,
        403: openai.PermissionDeniedError,
        404: openai.NotFoundError,
        409: openai.ConflictError,
        422: openai.UnprocessableEntityError,
        429: openai.RateLimitError,
    }.get(status, openai.InternalServerError if status >= 500 else openai.APIStatusError)
    return cls(msg, response=response, body=None)


@pytest.mark.parametrize(
    ("exc", "kind", "retry"),
    [
        (status_error(429), ErrorKind.RATE_LIMITED, True),
        (status_error(500), ErrorKind.SERVER_ERROR, True),
        (status_error(502), ErrorKind.SERVER_ERROR, True),
        (status_error(503), ErrorKind.SERVER_ERROR, True),
        (status_error(409), ErrorKind.SERVER_ERROR, True),
        (status_error(408), ErrorKind.TIMEOUT, True),
        (status_error(400), ErrorKind.BAD_REQUEST, False),
        (
            status_error(400, msg="maximum context length exceeded"),
            ErrorKind.CONTEXT_OVERFLOW,
            False,
        ),
        (status_error(401), ErrorKind.AUTH, False),
        (status_error(403), ErrorKind.AUTH, False),
        (status_error(404), ErrorKind.NOT_FOUND, False),
        (status_error(422), ErrorKind.BAD_REQUEST, False),
        (openai.APITimeoutError(request=REQUEST), ErrorKind.TIMEOUT, True),
        (openai.APIConnectionError(request=REQUEST), ErrorKind.CONNECTION, True),
        (BadResponseError("no choices"), ErrorKind.BAD_RESPONSE, True),
        (RuntimeError("bug"), ErrorKind.INTERNAL, False),
    ],
)
def test_classification_table(exc: Exception, kind: ErrorKind, retry: bool) -> None:
    assert classify(exc) is kind
    assert is_retryable(kind) is retry


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({}, None),
        ({"Retry-After": "2"}, 2.0),
        ({"retry-after": "0.35"}, 0.35),
        ({"retry-after-ms": "1500"}, 1.5),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"Retry-After": email.utils.formatdate(NOW + 7, usegmt=True)}, 7.0),
        ({"Retry-After": email.utils.formatdate(NOW - 30, usegmt=True)}, 0.0),
        ({"Retry-After": "-3"}, 0.0),
        ({"Retry-After": "3600"}, 60.0),
        ({"Retry-After": "soon"}, None),
    ],
)
def test_retry_after_table(headers: dict[str, str], expected: float | None) -> None:
    assert parse_retry_after(headers, NOW) == pytest.approx(expected)


def test_retry_after_is_read_from_the_sdk_error() -> None:
    assert retry_after_of(status_error(429, {"Retry-After": "1.25"}), NOW) == 1.25
    assert retry_after_of(openai.APITimeoutError(request=REQUEST), NOW) is None


@pytest.mark.parametrize(
    ("attempt", "retry_after", "rand", "expected"),
    [
        (1, None, 1.0, 0.5),
        (2, None, 1.0, 1.0),
        (3, None, 0.5, 1.0),
        (10, None, 1.0, 20.0),  # capped
        (1, None, 0.0, 0.0),  # full jitter reaches zero
        (1, 3.0, 1.0, 3.0),  # never sooner than Retry-After
        (6, 3.0, 1.0, 16.0),
    ],
)
def test_backoff_table(
    attempt: int, retry_after: float | None, rand: float, expected: float
) -> None:
    assert backoff_delay(attempt, retry_after, rand=lambda: rand) == pytest.approx(expected)
