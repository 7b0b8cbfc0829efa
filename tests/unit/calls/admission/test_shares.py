"""The tenant share rule as pure functions (swarm.calls.admission.shares)."""

from __future__ import annotations

import math

import pytest

from swarm.calls.admission import AdmissionPolicy, Decision, MemoryAdmission, Outcome, Refusal
from swarm.calls.admission.base import Ask
from swarm.calls.admission.shares import (
    HOLD_MS,
    Hold,
    Tenant,
    Use,
    call_shift,
    catch_up_ms,
    charged,
    completed,
    correction,
    decayed_tokens,
    expected_completion,
    held_after_admission,
    held_after_refusal,
    job_key,
    job_over_share,
    shares,
    standing,
    tenant_of,
)
from swarm.catalog import ModelSpec, load_catalog

W = 60_000.0


@pytest.mark.parametrize(
    ("mine", "weight", "waiting", "refused"),
    [
        (100, 1, [], False),  # nobody else waits: never refused (work-conserving)
        (100, 1, [(50, 1)], True),  # above the waiting tenant
        (100, 3, [(50, 1)], False),  # 33 per weight against 50
        (300, 3, [(100, 1)], False),  # exactly at 3:1: not above
        (301, 3, [(100, 1)], True),
        (0, 1, [(0, 1)], False),  # both fresh
        (10, 1, [(500, 1), (5, 1)], True),  # the lowest of the waiting ones counts
        (10, 2, [(500, 1), (5, 1)], False),
    ],
)
def test_a_tenant_above_the_lowest_waiting_normalized_use_waits(
    mine: float, weight: float, waiting: list[tuple[float, float]], refused: bool
) -> None:
    uses = {"me": Use(mine, 0, weight)}
    uses.update({f"t{i}": Use(use, 0, w) for i, (use, w) in enumerate(waiting)})
    keys = [job_key(f"t{i}", "1") for i in range(len(waiting))]
    assert standing(uses, keys, Tenant("me", weight), 0, W).over is refused


@pytest.mark.parametrize(
    ("use", "now", "expected"),
    [
        (Use(1000, 0), 0, 1000),
        (Use(1000, 0), W, 1000 / math.e),
        (Use(1000, 10), 5, 1000),  # a clock behind the last charge: no growth
        (Use(-5, 0), 0, 0),  # never below 0
    ],
)
def test_recent_use_decays_with_the_window(use: Use, now: float, expected: float) -> None:
    assert decayed_tokens(use, now, W) == pytest.approx(expected)


def test_a_charge_adds_to_the_decayed_use_and_a_refund_never_goes_below_zero() -> None:
    use = charged(Use(1000, 0), W, W, 500, 3.0)
    assert (use.tokens, use.at_ms, use.weight) == (pytest.approx(1000 / math.e + 500), W, 3.0)
    assert charged(Use(100, 0), 0, W, -500, 1.0).tokens == 0


@pytest.mark.parametrize(
    ("delta", "held", "expected"),
    [(-400, 0, -400), (-400, W, -400 / math.e), (200, W, 200 / math.e), (50, -10, 50)],
)
def test_a_correction_decays_as_the_charge_it_corrects(
    delta: float, held: float, expected: float
) -> None:
    assert correction(delta, held, W) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("key", "tenant"),
    [(job_key("team-a", "j1"), "team-a"), ("j1", "default"), (job_key("t", "a\tb"), "t")],
)
def test_a_job_key_names_its_tenant(key: str, tenant: str) -> None:
    assert tenant_of(key) == tenant


A1, A2, B1 = job_key("a", "1"), job_key("a", "2"), job_key("b", "1")


@pytest.mark.parametrize(
    ("inflight", "waiting", "key", "refused"),
    [
        ({A1: 5}, [A2], A1, True),  # another job of its tenant waits: 5 >= ceil(10 / 2)
        ({A1: 4}, [A2], A1, False),
        ({A1: 9}, [B1], A1, False),  # only another tenant's job waits: the tenant rule's
        ({A1: 4, A2: 1}, [A2, B1], A1, False),  # b's job does not count: ceil(10 / 2) = 5
        ({A1: 4, A2: 1, B1: 3}, [A2], A1, False),
        ({}, [A2], A1, False),  # holds nothing: never refused
    ],
)
def test_jobs_share_slots_equally_within_their_tenant(
    inflight: dict[str, int], waiting: list[str], key: str, refused: bool
) -> None:
    assert job_over_share(inflight, waiting, key, 10) is refused


def test_the_tenant_rule_reads_the_waiting_tenants_from_their_job_keys() -> None:
    uses = {"a": Use(300, 0, 3), "b": Use(90, 0, 1)}
    assert standing(uses, [B1], Tenant("a", 3), 0, W).over is True
    assert standing(uses, [A1, A2], Tenant("a", 3), 0, W).over is False  # own jobs only
    assert standing(uses, [A1], Tenant("b", 1), 0, W).over is False
    assert standing(uses, [job_key("c", "1")], Tenant("b", 1), 0, W).over is True  # c: 0


def test_a_tenant_below_every_waiting_one_is_preferred() -> None:
    uses = {"a": Use(300, 0, 3), "b": Use(90, 0, 1)}
    assert standing(uses, [A1], Tenant("b", 1), 0, W).preferred is True  # 90 < 100
    assert standing(uses, [B1], Tenant("a", 3), 0, W).preferred is False
    assert standing(uses, [B1], Tenant("b", 1), 0, W).preferred is False  # nobody else waits
    assert standing(uses, [], Tenant("b", 1), 0, W).preferred is False
    level = {"a": Use(90, 0, 1), "b": Use(90, 0, 1)}
    assert standing(level, [A1], Tenant("b", 1), 0, W).preferred is False  # level: not below


def test_a_preferred_tenants_hint_counts_its_own_waiters_in_process() -> None:
    clock = [1_000_000.0]
    ctl = MemoryAdmission(AdmissionPolicy(), lambda: clock[0])
    model = (
        load_catalog()
        .model("kimi-k2.5")
        .model_copy(update={"rpm": 6_000_000, "rps": None, "tpm": 100_000_000, "max_inflight": 2})
    )
    a, b = Tenant("a", 1), Tenant("b", 1)

    def acquire(job: str, tenant: Tenant, lease: str) -> Decision:
        clock[0] += 10
        return ctl.acquire(model, Ask(job, 100, lease_id=lease, tenant=tenant))

    for i in range(5):  # 0.1 s calls one after another: 0.11 s between releases
        permit = acquire("ja", a, f"w{i}").permit
        assert permit is not None
        clock[0] += 100
        ctl.finish(model, permit, Outcome(used_tokens=100))
    assert all(acquire("ja", a, f"h{i}").permit for i in range(2))
    hints = [acquire("ja", a, f"a{i}").retry_after_s for i in range(20)]
    assert hints[-1] == 1.0  # 20 waiters x 0.11 s / 2, at most max_poll_s
    waits = acquire("jb", b, "b0")  # below team-a's share: its own waiters only (none)
    assert waits.reason is Refusal.INFLIGHT and waits.retry_after_s < 0.2
    assert acquire("ja", a, "a20").retry_after_s == 1.0  # team-a's counts all 21 waiters


def test_shares_list_the_busy_tenants_with_their_weighted_targets() -> None:
    uses = {"a": Use(300, 0, 3), "b": Use(100, 0, 1), "gone": Use(0.5, 0, 1)}
    rows = shares(uses, 0, W)
    assert [(r.tenant, r.share, r.target) for r in rows] == [("a", 0.75, 0.75), ("b", 0.25, 0.25)]
    assert shares({}, 0, W) == ()


class Clock:
    ms = 1_000_000.0

    def __call__(self) -> float:
        return self.ms


def model() -> ModelSpec:
    limits = {"rpm": 6_000_000, "tpm": 100_000_000, "max_inflight": 2, "rps": None}
    return load_catalog().model("kimi-k2.5").model_copy(update=limits)


def test_the_busier_tenant_waits_until_the_other_got_its_weighted_tokens() -> None:
    clock = Clock()
    ctl = MemoryAdmission(AdmissionPolicy(), clock)
    spec, a, b = model(), Tenant("a", 3), Tenant("b", 1)

    def acquire(job: str, tokens: int, tenant: Tenant) -> Decision:
        clock.ms += 1
        return ctl.acquire(spec, Ask(job, tokens, tenant=tenant))

    held = [acquire("ja", 1000, a).permit for _ in range(2)]
    refused = acquire("jb", 100, b)
    assert refused.reason is Refusal.INFLIGHT  # b waits now
    for permit in held:
        assert permit is not None
        ctl.finish(spec, permit, Outcome(used_tokens=1000))
    assert acquire("ja", 1000, a).reason is Refusal.TENANT_SHARE
    got_b = acquire("jb", 100, b).permit
    assert got_b is not None and got_b.tenant == "b"
    # the answer was far longer than reserved: b's use is corrected up to 1000 tokens
    ctl.finish(spec, got_b, Outcome(used_tokens=1000))
    assert acquire("ja", 1000, a).permit is not None  # 2000 / 3 < 1000
    rows = {r.tenant: r for r in ctl.counters(spec).tenants}
    assert rows["a"].tokens == pytest.approx(3000, rel=1e-3)
    assert rows["b"].tokens == pytest.approx(1000, rel=1e-3)
    assert rows["a"].target == 0.75


def test_a_tenants_usual_completion_is_a_running_mean_of_the_reported_ones() -> None:
    use = Use(1000, 0, 1)
    assert expected_completion(use) == 0  # no answer yet
    use = completed(use, 300)
    assert expected_completion(use) == 300  # the first is the mean
    use = completed(use, 50)
    assert expected_completion(use) == pytest.approx(250)  # 300 + 0.2 x (50 - 300)
    assert completed(use, None) == use  # not reported: unchanged
    assert charged(use, 0, W, 10, 1).completion == use.completion  # a charge keeps it


@pytest.mark.parametrize(
    ("gap", "weight", "rate", "expected"),
    [(100, 1, 2, 50), (100, 3, 2, 150), (0, 1, 2, 0), (-5, 1, 2, 0), (100, 1, 0, math.inf)],
)
def test_the_catch_up_is_the_gap_at_the_whole_models_rate(
    gap: float, weight: float, rate: float, expected: float
) -> None:
    assert catch_up_ms(gap, weight, rate) == expected


def test_a_call_stands_at_its_tenants_use_plus_half_its_cost() -> None:
    uses = {"a": Use(3030, 0, 3), "b": Use(1000, 0, 1)}
    small, large = call_shift(10, 1), call_shift(6000, 1)
    assert (small, large) == (5, 3000)
    assert not standing(uses, [A1], Tenant("b", 1), 0, W, shift=small).over  # 1,005 vs 1,010
    assert standing(uses, [A1], Tenant("b", 1), 0, W, shift=small + 6).over is True
    assert standing(uses, [A1], Tenant("b", 1), 0, W, shift=large).over is True
    held = {"b": Hold(3000, HOLD_MS)}  # b's large call waits: it stands for b
    assert standing(uses, [A1], Tenant("b", 1), 0, W, held, small).over is True
    place = standing(uses, [B1], Tenant("a", 3), 0, W, held, call_shift(30, 3))
    assert (place.over, place.preferred, place.lowest) == (False, True, 4000)
    assert standing(uses, [B1], Tenant("a", 3), HOLD_MS, W, held).lowest < 4000  # lapsed


def test_the_largest_refused_call_holds_its_tenants_place_until_admitted() -> None:
    hold = held_after_refusal(None, 3000, 0)
    assert hold == Hold(3000, HOLD_MS)
    assert held_after_refusal(hold, 5, 10) == hold  # a smaller call does not replace it
    assert held_after_refusal(hold, 3000, 10) == Hold(3000, 10 + HOLD_MS)  # renewed
    assert held_after_admission(hold, 5, 10) == hold  # a small call went: still held
    assert held_after_admission(hold, 3000, 10) is None  # the held call went
    assert held_after_refusal(hold, 5, HOLD_MS + 1) == Hold(5, 2 * HOLD_MS + 1)  # lapsed
