"""Refusals told apart by status and body: the providers' documented error bodies, read the
way the openai SDK hands them over (its own status-error factory)."""

from __future__ import annotations

import calendar
from typing import Any

import httpx2
import openai
import pytest

from swarm.calls.provider_errors import (
    daily_reset_at,
    final_for_backend,
    next_utc_midnight,
    read_refusal,
)
from swarm.calls.retries import one_line
from swarm.calls.retry_policy import classify, is_retryable
from swarm.records import ErrorKind

REQUEST = httpx2.Request("POST", "http://gw/v1/chat/completions")
CLIENT = openai.OpenAI(base_url="http://gw/v1", api_key="k")


def refused(status: int, error: dict[str, Any], headers: dict[str, str] | None = None) -> Any:
    """The exception the openai SDK raises for this answer."""
    response = httpx2.Response(status, json={"error": error}, headers=headers, request=REQUEST)
    return CLIENT._make_status_error_from_response(response)


MOONSHOT_BALANCE = (
    "Your account org-abc<ak-def> is suspended due to insufficient balance, please recharge "
    "your account or check your plan and billing details"
)
MOONSHOT_TPD = "request reached organization TPD rate limit, current: 1500012, limit: 1500000"
CASES = [
    # (status, error body, kind, retried)
    (429, {"message": MOONSHOT_BALANCE, "type": "exceeded_current_quota_error"},
     ErrorKind.INSUFFICIENT_BALANCE, False),
    (403, {"message": MOONSHOT_BALANCE, "type": "exceeded_current_quota_error"},
     ErrorKind.INSUFFICIENT_BALANCE, False),
    (429, {"message": MOONSHOT_TPD, "type": "rate_limit_reached_error"},
     ErrorKind.DAILY_LIMIT, False),
    (429, {"message": "request reached organization max RPM: 3, please try again after 1 "
                      "seconds", "type": "rate_limit_reached_error"},
     ErrorKind.RATE_LIMITED, True),
    (429, {"message": "The engine is currently overloaded, please try again later",
           "type": "engine_overloaded_error"},
     ErrorKind.OVERLOADED, True),
    (400, {"message": "The request was rejected because it was considered high risk",
           "type": "content_filter"},
     ErrorKind.CONTENT_FILTER, False),
    (429, {"message": "You exceeded your current quota, please check your plan and billing "
                      "details.", "type": "insufficient_quota", "param": None,
           "code": "insufficient_quota"},
     ErrorKind.INSUFFICIENT_BALANCE, False),
    (429, {"message": "Rate limit reached for gpt-4o in organization org-x on tokens per min "
                      "(TPM): Limit 30000, Used 29000, Requested 2000. Please try again in 2s.",
           "type": "tokens", "param": None, "code": "rate_limit_exceeded"},
     ErrorKind.RATE_LIMITED, True),
    (429, {"message": "Rate limit reached for gpt-4o on requests per day (RPD): Limit 200",
           "type": "requests", "code": "rate_limit_exceeded"},
     ErrorKind.DAILY_LIMIT, False),
    (402, {"message": "Insufficient Balance", "type": "unknown_error", "param": None,
           "code": "invalid_request_error"},
     ErrorKind.INSUFFICIENT_BALANCE, False),
    (401, {"message": "Invalid Authentication", "type": "invalid_authentication_error"},
     ErrorKind.AUTH, False),
    (400, {"message": "invalid temperature: only 1 is allowed for this model",
           "type": "invalid_request_error"},
     ErrorKind.BAD_REQUEST, False),
    (503, {"message": "Server Overloaded", "type": "server_error"}, ErrorKind.OVERLOADED, True),
]  # fmt: skip


@pytest.mark.parametrize(("status", "error", "kind", "retried"), CASES)
def test_each_documented_refusal_has_its_kind(
    status: int, error: dict[str, Any], kind: ErrorKind, retried: bool
) -> None:
    exc = refused(status, error)
    assert classify(exc) is kind
    assert is_retryable(classify(exc)) is retried


@pytest.mark.parametrize(("status", "error", "kind", "retried"), CASES)
def test_the_node_error_quotes_the_provider(
    status: int, error: dict[str, Any], kind: ErrorKind, retried: bool
) -> None:
    line = one_line(refused(status, error))
    assert f"HTTP {status}" in line
    assert error["message"][:60] in line


def test_a_string_body_is_its_message() -> None:
    refusal = read_refusal(402, "Insufficient Balance")
    assert refusal.kind is ErrorKind.INSUFFICIENT_BALANCE
    assert refusal.describe() == "HTTP 402: Insufficient Balance"


def test_a_body_of_no_known_shape_is_left_to_the_status() -> None:
    assert read_refusal(429, None).kind is None
    assert read_refusal(429, {"detail": "slow down"}).kind is None


@pytest.mark.parametrize(
    ("kind", "status", "final"),
    [
        (ErrorKind.INSUFFICIENT_BALANCE, 429, True),
        (ErrorKind.AUTH, 401, True),
        (ErrorKind.AUTH, 403, False),
        (ErrorKind.RATE_LIMITED, 429, False),
        (ErrorKind.CONTENT_FILTER, 400, False),
    ],
)
def test_which_refusals_are_final_for_the_backend(
    kind: ErrorKind, status: int, final: bool
) -> None:
    assert final_for_backend(kind, status) is final


def test_a_daily_limit_resets_at_the_named_time_else_at_utc_midnight() -> None:
    now = calendar.timegm((2026, 12, 5, 6, 30, 0))
    assert next_utc_midnight(now) == calendar.timegm((2026, 12, 6, 0, 0, 0))
    assert daily_reset_at({}, now) == calendar.timegm((2026, 12, 6, 0, 0, 0))
    assert daily_reset_at({"Retry-After": "3600"}, now) == now + 3600
