"""Retry-After and x-ratelimit-* parsing, and the AIMD steps, as tables."""

from __future__ import annotations

import email.utils

import pytest

from swarm.calls.admission.feedback import (
    RateLimitHeaders,
    aimd_decrease,
    aimd_increase,
    parse_duration_s,
    parse_ratelimit_headers,
    pause_after_429_s,
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
