"""GCRA arithmetic: exact waits, and the sliding-window guarantee under arrival shifts."""

from __future__ import annotations

import random

import pytest

from swarm.calls.admission.limits import (
    AdmissionPolicy,
    Limit,
    gcra,
    hold_mean_ms,
    interval_ms,
    key_prefix,
    model_limits,
    refund_tat,
    release_mean_ms,
    slot_poll_ms,
)
from swarm.catalog import load_catalog


def test_interval_leaves_room_for_burst_and_slack() -> None:
    rps5 = Limit("rps", 5, 1000.0, 1, False)
    assert interval_ms(rps5, 1.0, 50.0) == pytest.approx(1100 / 4)
    assert interval_ms(rps5, 0.5, 50.0) == pytest.approx(1100 / 1.5)
    assert interval_ms(rps5, 0.1, 50.0) == pytest.approx(1100 / 0.25)  # half the allowed


@pytest.mark.parametrize(
    ("tat", "now", "cost", "burst", "wait", "new_tat"),
    [
        (0.0, 1000.0, 1, 1, 0.0, 1100.0),  # empty bucket: admitted
        (1100.0, 1000.0, 1, 1, 100.0, 1200.0),  # one interval early: exact wait
        (1100.0, 1000.0, 1, 2, 0.0, 1200.0),  # a bucket of 2 absorbs it
        (1000.0, 1000.0, 5, 2, 0.0, 1500.0),  # larger than the bucket, bucket full: debt
        (1300.0, 1000.0, 5, 2, 300.0, 1800.0),  # larger than the bucket: wait until full
    ],
)
def test_gcra_table(
    tat: float, now: float, cost: int, burst: int, wait: float, new_tat: float
) -> None:
    assert gcra(tat, now, cost, 100.0, burst) == (pytest.approx(wait), pytest.approx(new_tat))


def test_refund_never_goes_below_now_and_debt_extends() -> None:
    assert refund_tat(5000.0, 1000.0, -10, 100.0) == 4000.0
    assert refund_tat(1500.0, 1000.0, -10, 100.0) == 1000.0
    assert refund_tat(500.0, 1000.0, 3, 100.0) == 1300.0


@pytest.mark.parametrize(("limit", "window_ms"), [(5, 1000.0), (80, 1000.0), (600, 60000.0)])
def test_no_window_exceeds_the_limit_even_with_shifted_arrivals(
    limit: int, window_ms: float
) -> None:
    slack_ms = 50.0
    spec = Limit("rpm", limit, window_ms, 1, False)
    t_ms, tat, now, admitted = interval_ms(spec, 1.0, slack_ms), 0.0, 0.0, []
    rng = random.Random(3)
    while now < 3 * window_ms:
        wait, new_tat = gcra(tat, now, 1, t_ms, 1)
        if wait == 0:
            tat = new_tat
            admitted.append(now + rng.uniform(-slack_ms, slack_ms))  # arrival at the gateway
        now += rng.uniform(0.0, t_ms / 3)
    admitted.sort()
    worst = max(sum(1 for t in admitted if a <= t < a + window_ms) for a in admitted)
    assert worst <= limit
    assert len(admitted) >= 0.6 * 3 * limit  # and the rate is not far below it


def test_model_limits_and_keys() -> None:
    spec = load_catalog().model("kimi-k2.5").model_copy(update={"rps": 7})
    names = [lim.name for lim in model_limits(spec, AdmissionPolicy())]
    assert names == ["rpm", "rps", "tpm"]
    prefix = key_prefix("http://gw/v1", "kimi-k2.5")
    assert prefix.startswith("{llm:") and prefix.endswith(":kimi-k2.5}")
    assert prefix != key_prefix("http://other/v1", "kimi-k2.5")


@pytest.mark.parametrize(
    ("waiters", "gap_ms", "hint_ms"),
    [(0, 100.0, 50.0), (1, 100.0, 50.0), (9, 100.0, 450.0), (100, 100.0, 1000.0), (50, 0.0, 50.0)],
)
def test_slot_poll_spreads_waiters_over_the_releases(
    waiters: int, gap_ms: float, hint_ms: float
) -> None:
    assert slot_poll_ms(50.0, 1000.0, waiters, gap_ms) == hint_ms


def test_release_mean_is_an_ewma_with_capped_gaps() -> None:
    assert release_mean_ms(None, 80.0) == 80.0
    assert release_mean_ms(100.0, 200.0) == pytest.approx(110.0)
    assert release_mean_ms(100.0, 60_000.0) == pytest.approx(190.0)  # an idle minute counts 1 s


def test_waiters_no_more_than_the_slots_wait_at_most_until_the_oldest_call_should_end() -> None:
    assert slot_poll_ms(50, 1000, 10, 200.0) == 1000  # by the mean gap alone: the cap
    assert slot_poll_ms(50, 1000, 10, 200.0, next_end_ms=120, slots=10) == 120
    assert slot_poll_ms(50, 1000, 10, 200.0, next_end_ms=-30, slots=10) == 50  # overdue
    assert slot_poll_ms(50, 1000, 11, 200.0, next_end_ms=120, slots=10) == 1000  # too many
    assert hold_mean_ms(None, 200.0) == 200.0
    assert hold_mean_ms(200.0, 100.0) == pytest.approx(180.0)
