"""The admission contract: the same rules from every controller, the in-process one (on a
fake clock) and the Redis one (its Lua scripts on a real redis-server, on Redis TIME).

A harness hides the one difference: how time passes (the fake clock moves at once, Redis
time by sleeping), so each rule is written once.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import redis

from swarm.calls.admission import (
    AdmissionController,
    AdmissionPolicy,
    Decision,
    MemoryAdmission,
    Outcome,
    Permit,
    Refusal,
)
from swarm.calls.admission.base import Ask
from swarm.calls.admission.redis import RedisAdmission
from swarm.calls.admission.shares import Tenant
from swarm.catalog import ModelSpec, load_catalog

pytestmark = pytest.mark.integration

GAP_S = 0.011
"""Between two acquires: the default request limit of the specs below spaces calls 10 ms."""


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000.0

    def __call__(self) -> float:
        return self.ms


@dataclass
class Harness:
    """Controllers of one kind, sharing state, and a way to let time pass."""

    kind: str
    client: redis.Redis | None = None
    clock: Clock = field(default_factory=Clock)
    shared: MemoryAdmission | None = None

    @property
    def exact(self) -> bool:
        """True when waits can be compared exactly (the fake clock)."""
        return self.kind == "memory"

    def controller(self, **policy: Any) -> AdmissionController:
        settings = AdmissionPolicy(**{"window_slack_s": 0.05, **policy})
        if self.client is not None:
            return RedisAdmission(self.client, "http://gw.test/v1", settings)
        if self.shared is None:
            self.shared = MemoryAdmission(settings, self.clock)
        return self.shared

    def advance(self, seconds: float) -> None:
        if self.client is not None:
            time.sleep(seconds)
        else:
            self.clock.ms += seconds * 1000

    def approx(self, value: float) -> Any:
        return pytest.approx(value) if self.exact else pytest.approx(value, abs=0.03)


@pytest.fixture(params=["memory", "redis"])
def h(request: pytest.FixtureRequest) -> Iterator[Harness]:
    if request.param == "memory":
        yield Harness("memory")
        return
    client = redis.Redis.from_url(request.getfixturevalue("redis_url"))
    client.flushdb()
    try:
        yield Harness("redis", client)
    finally:
        client.close()


def spec(**limits: int | None) -> ModelSpec:
    base = {"rpm": 6_000_000, "tpm": 100_000_000, "max_inflight": 100, "rps": None}
    return load_catalog().model("kimi-k2.5").model_copy(update={**base, **limits})


def take(h: Harness, ctl: AdmissionController, model: ModelSpec, job: str, n: int) -> list[Permit]:
    permits = []
    for _ in range(n):
        h.advance(GAP_S)
        permit = ctl.acquire(model, Ask(job, 1)).permit
        assert permit is not None
        permits.append(permit)
    return permits


def test_a_request_rate_spaces_calls_with_an_exact_retry_after(h: Harness) -> None:
    ctl, model = h.controller(), spec(rps=5)
    assert ctl.acquire(model, Ask("a", 10)).permit is not None
    refused = ctl.acquire(model, Ask("a", 10))
    assert refused.permit is None and refused.reason is Refusal.RPS
    assert refused.retry_after_s == h.approx(1.1 / 4)
    assert refused.retry_after_s <= 1.1 / 4
    h.advance(refused.retry_after_s + 0.005)
    assert ctl.acquire(model, Ask("a", 10)).permit is not None


def test_clients_share_the_inflight_cap_and_finishing_twice_is_harmless(h: Harness) -> None:
    first, second = h.controller(), h.controller()
    model = spec(max_inflight=2)
    permits = take(h, first, model, "a", 2)
    h.advance(GAP_S)
    assert second.acquire(model, Ask("b", 1)).reason is Refusal.INFLIGHT
    first.finish(model, permits[0], Outcome(used_tokens=1))
    first.finish(model, permits[0], Outcome(used_tokens=1))
    h.advance(GAP_S)
    assert second.acquire(model, Ask("b", 1)).permit is not None
    assert second.counters(model).inflight == 2


def test_a_dead_callers_lease_expires(h: Harness) -> None:
    ctl, model = h.controller(lease_s=0.3), spec(max_inflight=1)
    assert ctl.acquire(model, Ask("a", 1)).permit is not None  # never finished: the worker died
    h.advance(GAP_S)
    assert ctl.acquire(model, Ask("a", 1)).reason is Refusal.INFLIGHT
    h.advance(0.35)
    assert ctl.acquire(model, Ask("a", 1)).permit is not None
    counters = ctl.counters(model)
    assert counters.expired == 1 and counters.inflight == 1


def test_tokens_are_reserved_refunded_once_and_debts_are_paid(h: Harness) -> None:
    # A bucket of 50,000 tokens, refilled in 3 s: each refused ask below needs half of it
    # (1.5 s of refill), so a stalled test process on Redis time cannot turn it into a pass.
    ctl, model = h.controller(), spec(tpm=1_000_000)
    permit = ctl.acquire(model, Ask("a", 50_000)).permit
    assert permit is not None
    h.advance(GAP_S)
    assert ctl.acquire(model, Ask("a", 25_000)).reason is Refusal.TPM
    ctl.finish(model, permit, Outcome(used_tokens=0))  # a failed call: refunded
    ctl.finish(model, permit, Outcome(used_tokens=0))  # once
    h.advance(GAP_S)
    again = ctl.acquire(model, Ask("a", 49_000)).permit
    assert again is not None
    h.advance(GAP_S)
    assert ctl.acquire(model, Ask("a", 26_000)).reason is Refusal.TPM
    ctl.finish(model, again, Outcome(used_tokens=200_000))  # reported more: a debt
    h.advance(GAP_S)
    assert ctl.acquire(model, Ask("a", 1)).retry_after_s > 5.0
    assert ctl.counters(model).inflight == 0


def test_an_isolated_429_pauses_no_other_client(h: Harness) -> None:
    one, two = h.controller(), h.controller()
    model = spec()
    for i, permit in enumerate(take(h, one, model, "job-1", 10)):
        one.finish(model, permit, Outcome(used_tokens=0, rate_limited=i == 9, retry_after_s=5.0))
    h.advance(GAP_S)
    assert two.acquire(model, Ask("job-2", 1)).permit is not None
    counters = two.counters(model)
    assert counters.rate_limited == 1 and counters.pauses == 0 and counters.factor == 1.0
    assert two.job_rate_limited(model, "job-1") == 1


def test_a_dense_run_of_429s_pauses_every_client(h: Harness) -> None:
    one, two = h.controller(), h.controller()
    model = spec()
    for i, permit in enumerate(take(h, one, model, "job-1", 5)):
        one.finish(model, permit, Outcome(used_tokens=0, rate_limited=True, retry_after_s=5.0))
        assert (two.pause_left_s(model) > 0) == (i == 4)  # four in a row are not yet dense
    h.advance(GAP_S)
    assert two.acquire(model, Ask("job-2", 1)).reason is Refusal.PAUSED
    counters = two.counters(model)
    assert counters.pauses == 1 and counters.factor == pytest.approx(0.7)


def test_an_exhausted_limit_pauses_every_client_and_cuts_no_rate(h: Harness) -> None:
    one, two = h.controller(), h.controller()
    model = spec()
    limited = Outcome(used_tokens=0, rate_limited=True, retry_after_s=0.5, exhausted=True)
    for permit in take(h, one, model, "job-1", 3):
        one.finish(model, permit, limited)
    paused = two.acquire(model, Ask("job-2", 1))
    assert paused.reason is Refusal.PAUSED and paused.retry_after_s == h.approx(0.5)
    assert two.pause_left_s(model) == h.approx(0.5)
    counters = two.counters(model)
    assert counters.rate_limited == 3 and counters.factor == 1.0  # the spacing was right
    assert two.job_rate_limited(model, "job-1") == 3 and two.job_rate_limited(model, "job-2") == 0
    h.advance(0.5)
    assert two.pause_left_s(model) == 0.0
    assert two.acquire(model, Ask("job-2", 1)).permit is not None


def test_jobs_share_the_inflight_cap_fairly(h: Harness) -> None:
    ctl, model = h.controller(), spec(max_inflight=4)

    def acquire(job: str) -> Decision:
        h.advance(GAP_S)
        return ctl.acquire(model, Ask(job, 1))

    big = take(h, ctl, model, "big", 4)
    assert acquire("small").reason is Refusal.INFLIGHT  # the small job now waits
    ctl.finish(model, big[0], Outcome(used_tokens=1))
    assert acquire("big").reason is Refusal.FAIR_SHARE
    assert acquire("small").permit is not None
    ctl.finish(model, big[1], Outcome(used_tokens=1))
    assert acquire("small").permit is not None  # small reaches its share of 2
    assert acquire("big").reason is Refusal.INFLIGHT


A, B = Tenant("team-a", 3.0), Tenant("team-b", 1.0)


def test_tenants_share_tokens_by_weight_while_the_other_waits(h: Harness) -> None:
    ctl, model = h.controller(), spec(max_inflight=2)

    def acquire(job: str, tokens: int, tenant: Tenant) -> Decision:
        h.advance(GAP_S)
        return ctl.acquire(model, Ask(job, tokens, tenant=tenant))

    held = [acquire("ja", 1000, A).permit for _ in range(2)]
    assert acquire("jb", 100, B).reason is Refusal.INFLIGHT  # team-b waits now
    for permit in held:
        assert permit is not None and permit.tenant == "team-a"
        ctl.finish(model, permit, Outcome(used_tokens=1000))
    assert acquire("ja", 1000, A).reason is Refusal.TENANT_SHARE  # 2000 / 3 > 0
    got_b = acquire("jb", 100, B).permit
    assert got_b is not None and got_b.tenant == "team-b"
    ctl.finish(model, got_b, Outcome(used_tokens=1000))  # corrected up to 1000 tokens
    assert acquire("ja", 1000, A).permit is not None  # 2000 / 3 < 1000 / 1
    rows = {r.tenant: r for r in ctl.counters(model).tenants}
    assert rows["team-a"].tokens == pytest.approx(3000, rel=1e-3)
    assert rows["team-b"].tokens == pytest.approx(1000, rel=1e-3)
    assert (rows["team-a"].weight, rows["team-a"].share) == (3.0, pytest.approx(0.75, rel=1e-3))
    assert rows["team-b"].target == 0.25


def test_a_preferred_tenants_hint_counts_its_own_waiters(h: Harness) -> None:
    ctl, model = h.controller(), spec(max_inflight=2)

    def acquire(job: str, tenant: Tenant, lease: str) -> Decision:
        h.advance(GAP_S)
        return ctl.acquire(model, Ask(job, 100, lease_id=lease, tenant=tenant))

    for i in range(5):  # calls of 0.1 s one after another: about 0.11 s between releases
        permit = acquire("ja", A, f"warm{i}").permit
        assert permit is not None
        h.advance(0.1)
        ctl.finish(model, permit, Outcome(used_tokens=100))
    assert all(acquire("ja", A, f"held{i}").permit for i in range(2))
    for i in range(20):  # team-a's callers wait for the full model: their hint grows
        assert acquire("ja", A, f"a{i}").reason is Refusal.INFLIGHT
    # team-b, below team-a's share, takes the permits given back while it waits (team-a is
    # refused): its hint counts its own waiters (none yet), not team-a's 20
    waits = acquire("jb", B, "b0")
    assert waits.reason is Refusal.INFLIGHT and waits.retry_after_s < 0.3
    assert acquire("ja", A, "a20").retry_after_s > 0.5  # team-a's counts all the waiters


def test_a_refund_takes_back_the_tenants_charge(h: Harness) -> None:
    ctl, model = h.controller(), spec()
    permit = ctl.acquire(model, Ask("ja", 5000, tenant=A)).permit
    assert permit is not None
    (row,) = ctl.counters(model).tenants
    assert (row.tenant, row.tokens) == ("team-a", pytest.approx(5000, rel=1e-3))
    ctl.finish(model, permit, Outcome(used_tokens=0, failed=True))
    assert ctl.counters(model).tenants == ()  # nothing left: no row
    h.advance(GAP_S)
    again = ctl.acquire(model, Ask("ja", 10, tenant=A)).permit
    assert again is not None
    ctl.finish(model, permit, Outcome(used_tokens=0, failed=True))  # twice: no second refund
    (row,) = ctl.counters(model).tenants
    assert row.tokens == pytest.approx(10, rel=1e-3)


def test_the_tenant_is_charged_the_prompt_then_the_reported_usage(h: Harness) -> None:
    ctl, model = h.controller(), spec()
    permit = ctl.acquire(model, Ask("ja", 2100, tenant=A, charge=100)).permit  # + 2,000 budget
    assert permit is not None and (permit.charged, permit.tokens_reserved) == (100, 2100)
    (row,) = ctl.counters(model).tenants
    assert row.tokens == pytest.approx(100, rel=1e-3)  # the answer's length is not known yet
    ctl.finish(model, permit, Outcome(used_tokens=340))
    (row,) = ctl.counters(model).tenants
    assert row.tokens == pytest.approx(340, rel=1e-3)


def test_a_tenant_is_charged_its_usual_completion_at_admission(h: Harness) -> None:
    """Charged only its prompt, a tenant of long answers went on being admitted past its
    share for as long as its calls ran: its calls are charged the completion its calls
    have had lately (a running mean), corrected by the reported usage at the end."""
    ctl, model = h.controller(), spec()
    first = ctl.acquire(model, Ask("ja", 2100, tenant=A, charge=100)).permit
    assert first is not None and first.charged == 100  # no answer yet: the prompt only
    ctl.finish(model, first, Outcome(used_tokens=400, completion_tokens=300))
    h.advance(GAP_S)
    second = ctl.acquire(model, Ask("ja", 2100, tenant=A, charge=100)).permit
    assert second is not None and second.charged == 400  # prompt + the usual 300
    (row,) = ctl.counters(model).tenants
    assert row.tokens == pytest.approx(800, rel=1e-2)
    ctl.finish(model, second, Outcome(used_tokens=150, completion_tokens=50))
    (row,) = ctl.counters(model).tenants
    assert row.tokens == pytest.approx(550, rel=1e-2)  # corrected to what was used
    h.advance(GAP_S)
    third = ctl.acquire(model, Ask("ja", 2100, tenant=A, charge=100)).permit
    assert third is not None and third.charged == 100 + 250  # mean 300 + 0.2 x (50 - 300)


def test_a_tenant_waits_about_as_long_as_the_others_need_to_catch_up(h: Harness) -> None:
    """The tenant_share wait: how long the lowest waiting tenant needs to close the gap at
    the model's recent token rate, so a tenant just over the line waits briefly (in its
    task) and one far over it long (back to the queue)."""
    ctl, model = h.controller(), spec(max_inflight=1)

    def use(job: str, tenant: Tenant, tokens: int) -> None:
        h.advance(GAP_S)
        permit = ctl.acquire(model, Ask(job, tokens, tenant=tenant)).permit
        assert permit is not None
        ctl.finish(model, permit, Outcome(used_tokens=tokens))

    use("jb", B, 20_000)
    use("ja", A, 60_600)  # 20,200 per weight against team-b's 20,000
    h.advance(GAP_S)
    held = ctl.acquire(model, Ask("ja", 100, tenant=A)).permit
    assert held is not None
    h.advance(GAP_S)
    assert ctl.acquire(model, Ask("jb", 100, tenant=B)).reason is Refusal.INFLIGHT  # b waits
    ctl.finish(model, held, Outcome(used_tokens=100))
    h.advance(GAP_S)
    near = ctl.acquire(model, Ask("ja", 100, tenant=A))
    # team-b closes 233 per weight at 80,700 tokens a minute: about 0.17 s
    assert near.reason is Refusal.TENANT_SHARE and 0.1 < near.retry_after_s < 0.3
    h.advance(GAP_S)
    held = ctl.acquire(model, Ask("jb", 100, tenant=B)).permit  # below team-a: admitted
    assert held is not None
    h.advance(GAP_S)
    newcomer = Tenant("team-c", 1.0)  # nothing lately: 20,233 per weight below team-a
    assert ctl.acquire(model, Ask("jc", 100, tenant=newcomer)).reason is Refusal.INFLIGHT
    ctl.finish(model, held, Outcome(used_tokens=100))
    h.advance(GAP_S)
    far = ctl.acquire(model, Ask("ja", 100, tenant=A))  # team-c needs about 15 s
    assert far.reason is Refusal.TENANT_SHARE and 10 < far.retry_after_s < 20


def test_a_large_call_goes_half_its_size_below_the_line_and_holds_its_place(
    h: Harness,
) -> None:
    """Admitted at the line, a tenant's large call (an aggregation's prompt) left it its
    full size above the line while the others caught up, and the decay forgave the excess:
    lumps gave their tenant more than its share. A call stands at its tenant's normalized
    use plus half its charge; refused, it holds its tenant's place, so the tenant's small
    calls wait behind it and the other tenant goes until the large call fits."""
    ctl, model = h.controller(), spec(max_inflight=1)

    def acquire(job: str, tenant: Tenant, tokens: int) -> Decision:
        h.advance(GAP_S)
        return ctl.acquire(model, Ask(job, tokens, tenant=tenant))

    def use(job: str, tenant: Tenant, tokens: int) -> None:
        permit = acquire(job, tenant, tokens).permit
        assert permit is not None
        ctl.finish(model, permit, Outcome(used_tokens=tokens))

    use("ja", A, 30_000)  # 10,000 per weight
    use("jb", B, 10_000)
    held = acquire("ja", A, 300).permit  # 10,100 per weight
    assert held is not None
    assert acquire("jb", B, 100).reason is Refusal.INFLIGHT  # both wait now
    assert acquire("ja", A, 300).permit is None
    ctl.finish(model, held, Outcome(used_tokens=300))
    assert acquire("jb", B, 6_000).reason is Refusal.TENANT_SHARE  # 10,000 + 3,000 > 10,150
    assert acquire("jb", B, 10).reason is Refusal.TENANT_SHARE  # behind its large call
    use("ja", A, 300)  # team-a goes: 10,200 per weight, below team-b's 13,000
    use("ja", A, 8_700)  # 13,100
    large = acquire("jb", B, 6_000).permit  # 13,000 against 13,100: it fits now
    assert large is not None and large.tenant == "team-b"


def test_nobody_waiting_a_tenant_takes_every_slot(h: Harness) -> None:
    ctl, model = h.controller(), spec(max_inflight=3)
    first = ctl.acquire(model, Ask("jb", 10_000, tenant=B)).permit
    assert first is not None
    ctl.finish(model, first, Outcome(used_tokens=10_000))
    for _ in range(3):  # team-a alone asks: work-conserving, whatever its use
        h.advance(GAP_S)
        assert ctl.acquire(model, Ask("ja", 50_000, tenant=A)).permit is not None


def test_the_job_share_counts_only_the_jobs_of_one_tenant(h: Harness) -> None:
    ctl, model = h.controller(), spec(max_inflight=4)

    def acquire(job: str, tenant: Tenant) -> Decision:
        h.advance(GAP_S)
        return ctl.acquire(model, Ask(job, 10, tenant=tenant))

    heavy = acquire("jb", B).permit  # team-b used far more lately: the tenant rule lets a go
    assert heavy is not None
    ctl.finish(model, heavy, Outcome(used_tokens=100_000))
    held = [acquire("a1", A).permit for _ in range(4)]
    assert all(held)
    assert acquire("jb", B).reason is Refusal.INFLIGHT  # another tenant's job waits
    ctl.finish(model, held[0], Outcome(used_tokens=10))  # type: ignore[arg-type]
    assert acquire("a1", A).permit is not None  # not its job share: team-b's job is apart
    assert acquire("a2", A).reason is Refusal.INFLIGHT  # a job of team-a now waits
    ctl.finish(model, held[1], Outcome(used_tokens=10))  # type: ignore[arg-type]
    assert acquire("a1", A).reason is Refusal.FAIR_SHARE  # 4 >= ceil(4 / 2)
    assert acquire("a2", A).permit is not None


def test_rate_waits_within_the_reserve_book_slots_in_arrival_order(h: Harness) -> None:
    ctl, model = h.controller(), spec(rps=5)  # one call per 275 ms (1.1 s / 4)
    booked = [ctl.acquire(model, Ask("a", 1, reserve_s=1.0)) for _ in range(4)]
    assert all(d.permit is not None for d in booked)
    starts = [d.start_in_s for d in booked]
    assert starts[0] == 0.0
    for earlier, later in itertools.pairwise(starts):  # one slot each, in order (less the
        assert 0.15 < later - earlier <= 0.2751  # time between the calls on a busy machine)
    assert ctl.counters(model).inflight == 4  # a booked call holds its lease from now
    beyond = ctl.acquire(model, Ask("a", 1, reserve_s=1.0))  # its slot is 1.1 s away
    assert beyond.permit is None and beyond.reason is Refusal.RPS
    assert beyond.retry_after_s == h.approx(0.5)  # not before half the reserve
    unbooked = ctl.acquire(model, Ask("b", 1, reserve_s=0.0))  # no reserve: refused
    assert unbooked.permit is None and unbooked.retry_after_s > 1.0


def test_a_pause_or_the_inflight_cap_is_never_booked(h: Harness) -> None:
    ctl, model = h.controller(), spec(rps=5, max_inflight=1)
    first = ctl.acquire(model, Ask("a", 1, reserve_s=1.0)).permit
    assert first is not None
    full = ctl.acquire(model, Ask("a", 1, reserve_s=1.0))
    assert full.permit is None and full.reason is Refusal.RPS  # the longest wait names it
    ctl.finish(model, first, Outcome(rate_limited=True, retry_after_s=2.0, exhausted=True))
    paused = ctl.acquire(model, Ask("a", 1, reserve_s=1.0))
    assert paused.permit is None and paused.reason is Refusal.PAUSED
    assert paused.retry_after_s == h.approx(2.0)


def test_a_window_limit_lets_its_n_through_at_once(h: Harness) -> None:
    ctl = h.controller()
    model = spec(rpm=30).model_copy(update={"limit_window": "sliding"})
    assert len(take(h, ctl, model, "a", 30)) == 30  # no spacing: the window allows 30
    h.advance(GAP_S)
    refused = ctl.acquire(model, Ask("a", 1))
    assert refused.reason is Refusal.RPM
    oldest_leaves_s = 61.2 - 30 * GAP_S  # the first admission, 30 gaps ago, leaves
    # (the window widened by 1% each side)
    assert 60.0 < refused.retry_after_s <= oldest_leaves_s + 1e-6
    if h.exact:
        assert refused.retry_after_s == pytest.approx(oldest_leaves_s)


def test_a_bucket_limit_spaces_the_same_calls_evenly(h: Harness) -> None:
    ctl, model = h.controller(), spec(rpm=30)
    assert ctl.acquire(model, Ask("a", 1)).permit is not None
    assert ctl.acquire(model, Ask("a", 1)).reason is Refusal.RPM


def test_an_answer_saying_a_limit_is_used_up_holds_every_client_until_its_reset(
    h: Harness,
) -> None:
    one, two = h.controller(), h.controller()
    model = spec()
    (permit,) = take(h, one, model, "job-1", 1)
    verdict = one.finish(model, permit, Outcome(used_tokens=5, retry_after_s=0.5, exhausted=True))
    assert verdict.paused
    paused = two.acquire(model, Ask("job-2", 1))
    assert paused.reason is Refusal.PAUSED and paused.retry_after_s == h.approx(0.5)
    counters = two.counters(model)
    assert counters.rate_limited == 0 and counters.factor == 1.0 and counters.pauses == 1
    h.advance(0.5)
    assert two.acquire(model, Ask("job-2", 1)).permit is not None


def test_a_call_admitted_at_the_configured_limit_says_so(h: Harness) -> None:
    ctl = h.controller()
    window = spec(rpm=3).model_copy(update={"limit_window": "sliding"})
    assert [p.at_limit for p in take(h, ctl, window, "a", 3)] == [False, False, True]
    bucket = spec(rps=5).model_copy(update={"name": "bucket-model"})  # one per 275 ms
    first = ctl.acquire(bucket, Ask("a", 1, reserve_s=1.0)).permit
    booked = ctl.acquire(bucket, Ask("a", 1, reserve_s=1.0)).permit
    assert first is not None and not first.at_limit
    assert booked is not None and booked.at_limit  # it had to wait for its slot
    h.advance(1.0)
    later = ctl.acquire(bucket, Ask("a", 1)).permit
    assert later is not None and not later.at_limit  # slower than the limit allows
    assert not any(p.at_limit for p in take(h, ctl, spec(), "a", 3))  # far below its limit


def test_waiters_no_more_than_the_slots_ask_again_when_the_oldest_call_should_end(
    h: Harness,
) -> None:
    ctl, model = h.controller(), spec(max_inflight=3)
    for _ in range(3):  # calls of 0.1 s, a second apart: the mean gap between releases is 1 s
        (permit,) = take(h, ctl, model, "a", 1)
        h.advance(0.1)
        ctl.finish(model, permit, Outcome(used_tokens=1))
        h.advance(1.0)
    take(h, ctl, model, "a", 3)  # a wave of 3; its first call should end in under 0.1 s
    hints = [ctl.acquire(model, Ask("a", 1, lease_id=f"w{i}")).retry_after_s for i in range(3)]
    # by the mean gap alone the second and third waiters would ask again in 0.5 and 1 s,
    # long after the wave had ended
    assert max(hints) < 0.15


def test_a_permit_given_back_unused_frees_its_request_rate_slot(h: Harness) -> None:
    ctl, model = h.controller(), spec(rps=5)  # one call per 275 ms
    first = ctl.acquire(model, Ask("a", 1)).permit
    assert first is not None
    assert ctl.acquire(model, Ask("a", 1)).reason is Refusal.RPS
    ctl.finish(model, first, Outcome(used_tokens=0, sent=False))  # never sent
    assert ctl.acquire(model, Ask("a", 1)).permit is not None  # its slot is free again
    assert ctl.acquire(model, Ask("a", 1)).reason is Refusal.RPS  # and only its slot


def test_a_sent_permit_keeps_its_request_rate_slot(h: Harness) -> None:
    ctl, model = h.controller(), spec(rps=5)
    first = ctl.acquire(model, Ask("a", 1)).permit
    assert first is not None
    ctl.finish(model, first, Outcome(used_tokens=1))
    assert ctl.acquire(model, Ask("a", 1)).reason is Refusal.RPS


def test_a_permit_given_back_unused_leaves_a_window_limit(h: Harness) -> None:
    ctl = h.controller()
    model = spec(rpm=3).model_copy(update={"limit_window": "sliding"})
    permits = take(h, ctl, model, "a", 3)
    h.advance(GAP_S)
    assert ctl.acquire(model, Ask("a", 1)).reason is Refusal.RPM
    ctl.finish(model, permits[1], Outcome(used_tokens=0, sent=False))
    ctl.finish(model, permits[1], Outcome(used_tokens=0, sent=False))  # twice: one slot
    h.advance(GAP_S)
    assert ctl.acquire(model, Ask("a", 1)).permit is not None
    h.advance(GAP_S)
    assert ctl.acquire(model, Ask("a", 1)).reason is Refusal.RPM
