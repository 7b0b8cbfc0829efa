"""Retry-After and x-ratelimit-* parsing, the AIMD steps and when a 429 pauses everyone,
as tables."""

from __future__ import annotations

import email.utils
import math

import pytest

from swarm.calls.admission import AdmissionPolicy
from swarm.calls.admission.feedback import (
    RateLimitHeaders,
    aimd_decrease,
    aimd_increase,
    decayed,
    limit_exhausted,
    parse_duration_s,
    parse_ratelimit_headers,
    pause_after_429_s,
    tenant_limited,
)

NOW = 1_700_000_000.0
LATER_DATE = email.utils.formatdate(NOW + 7, usegmt=True)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"Retry-After": "2"}, 2.0),
        ({"retry-after": "0.35"}, 0.35),
        ({"Retry-After": LATER_DATE}, 7.0),
        ({"retry-after-ms": "250"}, 0.25),
        ({"Retry-After": "-3"}, 0.0),
        ({"Retry-After": "3600"}, 60.0),
        ({"Retry-After": "soon"}, None),
        ({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1.5s"}, 1.5),
        ({"X-RateLimit-Remaining-Tokens": "0", "X-RateLimit-Reset-Tokens": "6m0s"}, 60.0),
        ({"x-ratelimit-remaining-requests": "3", "x-ratelimit-reset-requests": "9s"}, None),
        ({"Retry-After": "1", "x-ratelimit-remaining-requests": "0",
          "x-ratelimit-reset-requests": "9s"}, 1.0),
        ({}, None),
    ],
)  # fmt: skip
def test_pause_after_429(headers: dict[str, str], expected: float | None) -> None:
    got = pause_after_429_s(headers, NOW)
    assert got == (pytest.approx(expected, abs=1e-6) if expected is not None else None)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1s", 1.0), ("20ms", 0.02), ("6m0s", 360.0), ("1h2m3.5s", 3723.5), ("0.35", 0.35),
        ("2", 2.0), ("", None), ("abc", None), ("5x", None), ("1s junk", None), (None, None),
    ],
)  # fmt: skip
def test_parse_duration(text: str | None, seconds: float | None) -> None:
    assert parse_duration_s(text) == (pytest.approx(seconds) if seconds is not None else None)


def test_parse_ratelimit_headers_any_case() -> None:
    headers = {
        "X-RateLimit-Limit-Requests": "600",
        "x-ratelimit-remaining-requests": "599",
        "x-ratelimit-reset-requests": "100ms",
        "x-ratelimit-limit-tokens": "2000000",
        "x-ratelimit-remaining-tokens": "nope",
        "x-ratelimit-reset-tokens": "1m30s",
    }
    assert parse_ratelimit_headers(headers) == RateLimitHeaders(
        limit_requests=600,
        remaining_requests=599,
        reset_requests_s=0.1,
        limit_tokens=2_000_000,
        remaining_tokens=None,
        reset_tokens_s=90.0,
    )


@pytest.mark.parametrize(("factor", "expected"), [(1.0, 0.7), (0.2, 0.14), (0.12, 0.1), (0.1, 0.1)])
def test_aimd_decrease_floors_at_min(factor: float, expected: float) -> None:
    assert aimd_decrease(factor, 0.7, 0.1) == pytest.approx(expected)


@pytest.mark.parametrize(("factor", "expected"), [(0.5, 0.55), (0.98, 1.0), (1.0, 1.0)])
def test_aimd_increase_never_above_the_catalog(factor: float, expected: float) -> None:
    assert aimd_increase(factor, 0.05) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("exhausted", "recent_429", "recent_requests", "paused"),
    [
        (True, 1.0, 100.0, True),  # the gateway said the limit is used up
        (False, 1.0, 1.0, False),  # one 429: isolated, even as the only request
        (False, 4.0, 4.0, False),  # four in a row: not yet dense
        (False, 4.9, 5.0, True),  # five in a row (decayed a little): dense
        (False, 30.0, 100.0, False),  # 30% random 429s: a noisy gateway
        (False, 60.0, 100.0, True),  # most requests refused: the tenant's limit
    ],
)
def test_when_a_429_pauses_everyone(
    exhausted: bool, recent_429: float, recent_requests: float, paused: bool
) -> None:
    policy = AdmissionPolicy()
    verdict = tenant_limited(
        exhausted, recent_429, recent_requests, policy.dense_min, policy.dense_share
    )
    assert verdict is paused


def test_exhausted_limits_and_decay() -> None:
    assert limit_exhausted({"X-RateLimit-Remaining-Requests": "0"})
    assert limit_exhausted({"x-ratelimit-remaining-tokens": "0"})
    assert not limit_exhausted({"x-ratelimit-remaining-requests": "12"})
    assert not limit_exhausted({})
    assert decayed(10.0, 0.0, 5000.0) == 10.0
    assert decayed(10.0, 5000.0, 5000.0) == pytest.approx(10.0 / math.e)
