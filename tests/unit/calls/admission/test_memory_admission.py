"""The in-process controller on a fake clock: what only an exact clock can show (the
rules every controller shares are in tests/integration/test_admission_contract.py)."""

from __future__ import annotations

import pytest

from swarm.calls.admission import (
    AdmissionPolicy,
    MemoryAdmission,
    Outcome,
    Permit,
    Refusal,
)
from swarm.calls.admission.base import Ask
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
        permit = ctl.acquire(model, Ask(job, 1)).permit
        assert permit is not None
        permits.append(permit)
    return permits


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def ctl(clock: Clock) -> MemoryAdmission:
    return MemoryAdmission(AdmissionPolicy(window_slack_s=0.05, lease_s=10), clock)


def test_429s_scattered_among_answers_stay_isolated(ctl: MemoryAdmission, clock: Clock) -> None:
    model = spec()
    for i, permit in enumerate(take(ctl, clock, model, "a", 60)):  # a 30% random 429 gateway
        limited = i % 10 in (1, 4, 7)
        ctl.finish(model, permit, Outcome(used_tokens=0, rate_limited=limited))
    assert ctl.counters(model).rate_limited == 18 and ctl.counters(model).pauses == 0


def test_an_exhausted_limit_pauses_everyone_and_dense_429s_cut_the_rate(
    ctl: MemoryAdmission, clock: Clock
) -> None:
    model = spec(rps=10)
    permit = ctl.acquire(model, Ask("a", 1)).permit
    assert permit is not None
    limited = Outcome(used_tokens=0, rate_limited=True, retry_after_s=3.0, exhausted=True)
    ctl.finish(model, permit, limited)
    paused = ctl.acquire(model, Ask("b", 1))
    assert paused.reason is Refusal.PAUSED and paused.retry_after_s == pytest.approx(3.0)
    assert ctl.counters(model).factor == 1.0  # one exhausted limit: a pause, no cut
    for _ in range(4):  # five 429s in a row (feedback applies to every finish): dense
        ctl.finish(model, permit, limited)
    counters = ctl.counters(model)
    assert counters.rate_limited == 5 and counters.factor == pytest.approx(0.7)
    assert ctl.job_rate_limited(model, "a") == 5 and ctl.job_rate_limited(model, "b") == 0
    clock.advance(3.0)
    assert ctl.acquire(model, Ask("b", 1)).permit is not None
    for _ in range(7):  # quiet periods bring the factor back to the catalog's limit, no higher
        clock.advance(5.0)
        ctl.acquire(model, Ask("b", 1))
    assert ctl.counters(model).factor == pytest.approx(1.0)


def test_inflight_waiters_together_ask_about_twice_per_release(
    ctl: MemoryAdmission, clock: Clock
) -> None:
    model = spec(max_inflight=1)
    for _ in range(5):  # one call every 100 ms: the mean gap between releases is 100 ms
        permit = ctl.acquire(model, Ask("a", 1)).permit
        assert permit is not None
        clock.advance(0.1)
        ctl.finish(model, permit, Outcome(used_tokens=1))
    held = ctl.acquire(model, Ask("a", 1)).permit
    assert held is not None
    hints = [ctl.acquire(model, Ask("a", 1, lease_id=f"w{i}")).retry_after_s for i in range(30)]
    assert hints[0] == pytest.approx(0.05)  # alone: the shortest poll
    assert hints[9] == pytest.approx(9 * 0.1 / 2)  # 9 waiters before it: 450 ms
    assert hints[29] == pytest.approx(1.0)  # never longer than max_poll_s
