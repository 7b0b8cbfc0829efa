"""Limiter math: sliding windows, token budgets, concurrency and Retry-After values."""

from __future__ import annotations

import math

import pytest

from swarm.sim.config import ModelLimits
from swarm.sim.limits import (
    CONCURRENCY_FALLBACK_RETRY_S,
    MIN_RETRY_S,
    UNLIMITED,
    Admitted,
    ConcurrencyGate,
    ModelLimiter,
    PeakCounter,
    Rejected,
    RequestWindow,
    TokenWindow,
    format_seconds,
)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.35, "0.35"), (2.0, "2"), (59.9784, "59.978"), (0.0001, "0"), (-1.0, "0"), (1.5, "1.5")],
)
def test_format_seconds(seconds: float, text: str) -> None:
    assert format_seconds(seconds) == text


def test_peak_counter_tracks_the_busiest_window() -> None:
    counter = PeakCounter(1.0)
    for t in (0.0, 0.2, 0.4, 1.3, 1.35):
        counter.add(t)
    assert counter.peak == 3
    assert counter.count(1.35) == 3  # 0.4, 1.3, 1.35 are in (0.35, 1.35]
    assert counter.count(1.45) == 2  # 0.4 is out of (0.45, 1.45]
    assert counter.count(2.35) == 0


def test_request_window_frees_when_the_oldest_event_expires() -> None:
    window = RequestWindow(limit=2, window_s=60.0, label="rpm")
    assert window.wait(0.0, 1) is None
    window.record(0.0, 1)
    window.record(10.0, 1)
    assert window.wait(20.0, 1) == pytest.approx(40.0)
    assert window.wait(59.9, 1) == pytest.approx(0.1)
    assert window.wait(60.0, 1) is None  # the event at t=0 is out of (0, 60]
    assert window.reset_in(20.0) == pytest.approx(50.0)


def test_token_window_waits_until_enough_tokens_expire() -> None:
    window = TokenWindow(limit=100, window_s=60.0, label="tpm")
    window.record(0.0, 60)
    window.record(10.0, 30)
    assert window.used(20.0) == 90
    assert window.wait(20.0, 10) is None
    assert window.wait(20.0, 50) == pytest.approx(40.0)  # the 60 at t=0 must expire
    assert window.wait(20.0, 80) == pytest.approx(50.0)  # both charges must expire
    assert window.wait(20.0, 101) == pytest.approx(60.0)  # never fits: full window
    assert window.used(60.0) == 30
    assert window.reset_in(20.0) == pytest.approx(50.0)


def test_concurrency_gate_reports_the_earliest_deadline() -> None:
    gate = ConcurrencyGate(limit=2)
    first = gate.acquire(deadline=5.0)
    second = gate.acquire(deadline=3.0)
    assert gate.full()
    assert gate.wait(1.0) == pytest.approx(2.0)
    gate.release(second)
    assert not gate.full()
    assert gate.wait(1.0) == pytest.approx(4.0)
    gate.release(first)
    gate.acquire(deadline=math.inf)
    assert gate.wait(1.0) == CONCURRENCY_FALLBACK_RETRY_S


def test_unlimited_gate_never_fills() -> None:
    gate = ConcurrencyGate(limit=None)
    for _ in range(1000):
        gate.acquire(1.0)
    assert not gate.full()
    assert gate.inflight == 1000


def test_limiter_rpm_rejects_with_retry_after_and_headers() -> None:
    limiter = ModelLimiter("m", ModelLimits(rpm=2))
    assert isinstance(limiter.admit(0.0, 10, 1.0), Admitted)
    assert isinstance(limiter.admit(5.0, 10, 6.0), Admitted)
    rejected = limiter.admit(15.0, 10, 16.0)
    assert isinstance(rejected, Rejected)
    assert rejected.retry_after_s == pytest.approx(45.0)
    assert "requests per min" in rejected.message
    headers = limiter.headers(15.0)
    assert headers["x-ratelimit-limit-requests"] == "2"
    assert headers["x-ratelimit-remaining-requests"] == "0"
    assert headers["x-ratelimit-reset-requests"] == "50s"
    assert headers["x-ratelimit-limit-tokens"] == str(UNLIMITED)
    assert headers["x-ratelimit-reset-tokens"] == "0s"
    assert isinstance(limiter.admit(60.0, 10, 61.0), Admitted)


def test_rejected_requests_are_not_charged() -> None:
    limiter = ModelLimiter("m", ModelLimits(rps=1, tpm=1000))
    assert isinstance(limiter.admit(0.0, 400, 0.1), Admitted)
    for _ in range(5):
        assert isinstance(limiter.admit(0.5, 400, 0.6), Rejected)
    assert limiter.headers(0.5)["x-ratelimit-remaining-tokens"] == "600"


def test_limiter_takes_the_longest_wait_of_all_exceeded_limits() -> None:
    limiter = ModelLimiter("m", ModelLimits(rps=1, tpm=100))
    assert isinstance(limiter.admit(0.0, 90, 0.5), Admitted)
    rejected = limiter.admit(0.25, 20, 0.75)
    assert isinstance(rejected, Rejected)
    assert rejected.retry_after_s == pytest.approx(59.75)  # tpm frees later than rps
    assert isinstance(limiter.admit(1.0, 10, 1.5), Admitted)  # rps freed, tokens fit


def test_limiter_max_concurrent_uses_inflight_deadlines() -> None:
    limiter = ModelLimiter("m", ModelLimits(max_concurrent=1))
    admitted = limiter.admit(0.0, 1, deadline=0.5)
    assert isinstance(admitted, Admitted)
    rejected = limiter.admit(0.2, 1, deadline=0.7)
    assert isinstance(rejected, Rejected)
    assert rejected.retry_after_s == pytest.approx(0.3)
    assert rejected.label == "concurrent requests"
    late = limiter.admit(0.6, 1, deadline=1.0)  # deadline passed but still in flight
    assert isinstance(late, Rejected)
    assert late.retry_after_s == MIN_RETRY_S
    limiter.release(admitted.ticket)
    assert isinstance(limiter.admit(0.6, 1, deadline=1.0), Admitted)


def test_requests_headers_fall_back_to_rps() -> None:
    limiter = ModelLimiter("m", ModelLimits(rps=5, tpm=1000))
    limiter.admit(0.0, 100, 0.0)
    headers = limiter.headers(0.5)
    assert headers["x-ratelimit-limit-requests"] == "5"
    assert headers["x-ratelimit-remaining-requests"] == "4"
    assert headers["x-ratelimit-reset-requests"] == "0.5s"
    assert headers["x-ratelimit-remaining-tokens"] == "900"
    assert headers["x-ratelimit-reset-tokens"] == "59.5s"
