"""The in-process controller on a fake clock: every rule of the Lua scripts."""

from __future__ import annotations

import pytest

from swarm.calls.admission import (
    AdmissionPolicy,
    Decision,
    MemoryAdmission,
    Outcome,
    Permit,
    Refusal,
)
from swarm.catalog import ModelSpec, load_catalog


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000.0

    def __call__(self) -> float:
        return self.ms

    def advance(self, seconds: float) -> None:
        self.ms += seconds * 1000


def spec(**limits: int | None) -> ModelSpec:
    base = {"rpm": 6000, "tpm": 10_000_000, "max_inflight": 100, "rps": None}
    return load_catalog().model("kimi-k2.5").model_copy(update={**base, **limits})


def take(ctl: MemoryAdmission, clock: Clock, model: ModelSpec, job: str, n: int) -> list[Permit]:
    """``n`` permits, 11 ms apart (the default request limit spaces calls 10 ms apart)."""
    permits = []
    for _ in range(n):
        clock.advance(0.011)
        permit = ctl.acquire(model, job, 1).permit
        assert permit is not None
        permits.append(permit)
    return permits


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def ctl(clock: Clock) -> MemoryAdmission:
    return MemoryAdmission(AdmissionPolicy(window_slack_s=0.05, lease_s=10), clock)


def test_rps_spacing_and_exact_retry_after(ctl: MemoryAdmission, clock: Clock) -> None:
    model = spec(rps=5)
    assert ctl.acquire(model, "a", 10).permit is not None
    refused = ctl.acquire(model, "a", 10)
    assert refused.permit is None and refused.reason is Refusal.RPS
    assert refused.retry_after_s == pytest.approx(1.1 / 4)
    clock.advance(refused.retry_after_s)
    assert ctl.acquire(model, "a", 10).permit is not None


def test_inflight_cap_and_release(ctl: MemoryAdmission, clock: Clock) -> None:
    model = spec(max_inflight=2)
    permits = take(ctl, clock, model, "a", 2)
    clock.advance(0.011)
    refused = ctl.acquire(model, "a", 1)
    assert refused.reason is Refusal.INFLIGHT
    ctl.finish(model, permits[0], Outcome(used_tokens=1))
    ctl.finish(model, permits[0], Outcome(used_tokens=1))  # releasing twice is harmless
    clock.advance(0.011)
    assert ctl.acquire(model, "a", 1).permit is not None
    assert ctl.counters(model).inflight == 2


def test_a_dead_callers_lease_expires(ctl: MemoryAdmission, clock: Clock) -> None:
    model = spec(max_inflight=1)
    assert ctl.acquire(model, "a", 1).permit is not None  # never finished: the worker died
    clock.advance(0.011)
    assert ctl.acquire(model, "a", 1).reason is Refusal.INFLIGHT
    clock.advance(10.01)
    assert ctl.acquire(model, "a", 1).permit is not None
    assert ctl.counters(model).expired == 1


def test_tokens_reserved_reconciled_and_refunded(ctl: MemoryAdmission, clock: Clock) -> None:
    model = spec(tpm=100_000)  # bucket 5000 tokens
    big = ctl.acquire(model, "a", 5000).permit
    assert big is not None
    clock.advance(0.011)
    assert ctl.acquire(model, "a", 100).reason is Refusal.TPM
    ctl.finish(model, big, Outcome(used_tokens=0))  # failed call: refund
    clock.advance(0.011)
    ok = ctl.acquire(model, "a", 4000).permit
    assert ok is not None
    ctl.finish(model, ok, Outcome(used_tokens=9000))  # reported more: debt, never refused
    clock.advance(0.011)
    refused = ctl.acquire(model, "a", 100)
    assert refused.reason is Refusal.TPM and refused.retry_after_s > 2.0


def test_429_pauses_everyone_and_cuts_the_rate(ctl: MemoryAdmission, clock: Clock) -> None:
    model = spec(rps=10)
    permit = ctl.acquire(model, "a", 1).permit
    assert permit is not None
    ctl.finish(model, permit, Outcome(used_tokens=0, rate_limited=True, retry_after_s=3.0))
    paused = ctl.acquire(model, "b", 1)
    assert paused.reason is Refusal.PAUSED and paused.retry_after_s == pytest.approx(3.0)
    counters = ctl.counters(model)
    assert counters.rate_limited == 1 and counters.factor == pytest.approx(0.7)
    assert ctl.job_rate_limited(model, "a") == 1 and ctl.job_rate_limited(model, "b") == 0
    clock.advance(3.0)
    assert ctl.acquire(model, "b", 1).permit is not None
    for _ in range(7):  # quiet periods bring the factor back to the catalog's limit, no higher
        clock.advance(5.0)
        ctl.acquire(model, "b", 1)
    assert ctl.counters(model).factor == pytest.approx(1.0)


def test_burst_of_429s_is_one_decrease(ctl: MemoryAdmission, clock: Clock) -> None:
    model = spec()
    for permit in take(ctl, clock, model, "a", 3):
        ctl.finish(model, permit, Outcome(used_tokens=0, rate_limited=True))
    assert ctl.counters(model).factor == pytest.approx(0.7)


def test_fair_share_between_two_jobs(ctl: MemoryAdmission, clock: Clock) -> None:
    model = spec(max_inflight=4)

    def acquire(job: str) -> Decision:
        clock.advance(0.011)
        return ctl.acquire(model, job, 1)

    big = take(ctl, clock, model, "big", 4)
    assert acquire("small").reason is Refusal.INFLIGHT  # the small job now waits
    ctl.finish(model, big[0], Outcome(used_tokens=1))
    assert acquire("big").reason is Refusal.FAIR_SHARE
    assert acquire("small").permit is not None
    ctl.finish(model, big[1], Outcome(used_tokens=1))
    assert acquire("small").permit is not None  # small reaches its share of 2
    assert acquire("big").reason is Refusal.INFLIGHT


def test_rate_waits_within_the_reserve_book_slots_in_arrival_order(
    ctl: MemoryAdmission, clock: Clock
) -> None:
    model = spec(rps=5)  # one call per 275 ms (1.1 s / 4)
    booked = [ctl.acquire(model, "a", 1, reserve_s=1.0) for _ in range(4)]
    assert all(d.permit is not None for d in booked)
    starts = [d.start_in_s for d in booked]
    assert starts == pytest.approx([0.0, 0.275, 0.55, 0.825])
    assert ctl.counters(model).inflight == 4  # a booked call holds its lease from now
    beyond = ctl.acquire(model, "a", 1, reserve_s=1.0)  # its slot is 1.1 s away
    assert beyond.permit is None and beyond.reason is Refusal.RPS
    assert beyond.retry_after_s == pytest.approx(0.5)  # not before half the reserve
    clock.advance(0.5)
    late = ctl.acquire(model, "a", 1, reserve_s=1.0)
    assert late.permit is not None and late.start_in_s == pytest.approx(0.6)


def test_a_pause_or_the_inflight_cap_is_never_booked(ctl: MemoryAdmission, clock: Clock) -> None:
    model = spec(rps=5, max_inflight=1)
    first = ctl.acquire(model, "a", 1, reserve_s=1.0).permit
    assert first is not None
    full = ctl.acquire(model, "a", 1, reserve_s=1.0)
    assert full.permit is None and full.reason is Refusal.RPS  # the longest wait names it
    ctl.finish(model, first, Outcome(rate_limited=True, retry_after_s=2.0))
    paused = ctl.acquire(model, "a", 1, reserve_s=1.0)
    assert paused.permit is None and paused.reason is Refusal.PAUSED
    assert paused.retry_after_s == pytest.approx(2.0)


def test_inflight_waiters_together_ask_about_twice_per_release(
    ctl: MemoryAdmission, clock: Clock
) -> None:
    model = spec(max_inflight=1)
    for _ in range(5):  # one call every 100 ms: the mean gap between releases is 100 ms
        permit = ctl.acquire(model, "a", 1).permit
        assert permit is not None
        clock.advance(0.1)
        ctl.finish(model, permit, Outcome(used_tokens=1))
    held = ctl.acquire(model, "a", 1).permit
    assert held is not None
    hints = [ctl.acquire(model, "a", 1, lease_id=f"w{i}").retry_after_s for i in range(30)]
    assert hints[0] == pytest.approx(0.05)  # alone: the shortest poll
    assert hints[9] == pytest.approx(9 * 0.1 / 2)  # 9 waiters before it: 450 ms
    assert hints[29] == pytest.approx(1.0)  # never longer than max_poll_s
