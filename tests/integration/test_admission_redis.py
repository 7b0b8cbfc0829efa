"""The admission Lua scripts against the real redis-server: the same rules as the in-process
controller (tests/unit/admission), on Redis TIME, shared by independent clients."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

import pytest
import redis

from swarm.calls.admission import AdmissionPolicy, Outcome, Refusal
from swarm.calls.admission.redis import RedisAdmission
from swarm.catalog import ModelSpec, load_catalog

pytestmark = pytest.mark.integration


def spec(**limits: int | None) -> ModelSpec:
    base = {"rpm": 6_000_000, "tpm": 100_000_000, "max_inflight": 100, "rps": None}
    return load_catalog().model("kimi-k2.5").model_copy(update={**base, **limits})


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(redis_url)
    yield c
    c.close()


def controller(client: redis.Redis, **policy: float) -> RedisAdmission:
    return RedisAdmission(client, "http://gw.test/v1", AdmissionPolicy(**policy))  # type: ignore[arg-type]


def test_rps_spacing_with_an_exact_retry_after(client: redis.Redis) -> None:
    ctl, model = controller(client), spec(rps=5)
    assert ctl.acquire(model, "a", 10).permit is not None
    refused = ctl.acquire(model, "a", 10)
    assert refused.reason is Refusal.RPS
    assert 0.2 < refused.retry_after_s <= 1.1 / 4
    time.sleep(refused.retry_after_s + 0.005)
    assert ctl.acquire(model, "a", 10).permit is not None


def test_two_clients_share_one_inflight_cap_and_leases_expire(client: redis.Redis) -> None:
    first, second = controller(client, lease_s=0.3), controller(client, lease_s=0.3)
    model = spec(max_inflight=2)
    held = [first.acquire(model, "a", 1).permit for _ in range(2)]
    assert all(held)
    assert second.acquire(model, "b", 1).reason is Refusal.INFLIGHT
    assert second.counters(model).inflight == 2
    time.sleep(0.35)  # the holder "died": its leases expire and the permits come back
    assert second.acquire(model, "b", 1).permit is not None
    counters = second.counters(model)
    assert counters.expired == 2 and counters.inflight == 1


def test_finish_releases_once_and_refunds_tokens(client: redis.Redis) -> None:
    ctl, model = controller(client), spec(tpm=1_000_000)  # bucket 50_000 tokens
    permit = ctl.acquire(model, "a", 50_000).permit
    assert permit is not None
    assert ctl.acquire(model, "a", 1000).reason is Refusal.TPM
    ctl.finish(model, permit, Outcome(used_tokens=0))
    ctl.finish(model, permit, Outcome(used_tokens=0))  # idempotent: no double refund
    again = ctl.acquire(model, "a", 49_000).permit
    assert again is not None
    assert ctl.acquire(model, "a", 2000).reason is Refusal.TPM
    ctl.finish(model, again, Outcome(used_tokens=200_000))  # debt: never refused
    assert ctl.acquire(model, "a", 1).retry_after_s > 5.0
    assert ctl.counters(model).inflight == 0


def test_a_429_pauses_every_client_and_cuts_the_rate_once(client: redis.Redis) -> None:
    one, two = controller(client), controller(client)
    model = spec()
    permits = [one.acquire(model, "job-1", 1).permit for _ in range(3)]
    for permit in permits:
        assert permit is not None
        one.finish(model, permit, Outcome(used_tokens=0, rate_limited=True, retry_after_s=0.5))
    paused = two.acquire(model, "job-2", 1)
    assert paused.reason is Refusal.PAUSED and 0.3 < paused.retry_after_s <= 0.5
    counters = two.counters(model)
    assert counters.rate_limited == 3 and counters.factor == pytest.approx(0.7)
    assert counters.paused_for_s > 0.3
    assert two.job_rate_limited(model, "job-1") == 3 and two.job_rate_limited(model, "job-2") == 0
    time.sleep(0.5)
    assert two.acquire(model, "job-2", 1).permit is not None


def test_fair_share_between_jobs(client: redis.Redis) -> None:
    ctl, model = controller(client), spec(max_inflight=4)
    big = [ctl.acquire(model, "big", 1).permit for _ in range(4)]
    assert ctl.acquire(model, "small", 1).reason is Refusal.INFLIGHT
    assert big[0] is not None and big[1] is not None
    ctl.finish(model, big[0], Outcome(used_tokens=1))
    assert ctl.acquire(model, "big", 1).reason is Refusal.FAIR_SHARE
    assert ctl.acquire(model, "small", 1).permit is not None
    ctl.finish(model, big[1], Outcome(used_tokens=1))
    assert ctl.acquire(model, "small", 1).permit is not None
    assert ctl.acquire(model, "big", 1).reason is Refusal.INFLIGHT


def test_keys_share_one_cluster_slot(client: redis.Redis) -> None:
    ctl, model = controller(client), spec()
    permit = ctl.acquire(model, "a", 1).permit
    assert permit is not None
    ctl.finish(model, permit, Outcome(used_tokens=0, rate_limited=True))
    assert ctl.acquire(spec(rpm=6_000_000), "b", 1).reason is Refusal.PAUSED  # a waiter
    time.sleep(0.01)
    keys = [k.decode() for k in client.keys("{llm:*")]
    assert len(keys) >= 4
    assert len({k[: k.index("}") + 1] for k in keys}) == 1


def test_rate_waits_within_the_reserve_book_slots_on_redis(client: redis.Redis) -> None:
    ctl, model = controller(client), spec(rps=5)  # one call per 275 ms
    booked = [ctl.acquire(model, "a", 1, reserve_s=1.0) for _ in range(4)]
    assert all(d.permit is not None for d in booked)
    starts = [d.start_in_s for d in booked]
    assert starts[0] == 0.0
    for earlier, later in itertools.pairwise(starts):  # one slot each, in order (less the
        assert 0.15 < later - earlier <= 0.2751  # time between the calls, on a busy machine)
    beyond = ctl.acquire(model, "a", 1, reserve_s=1.0)
    assert beyond.permit is None and beyond.reason is Refusal.RPS
    assert beyond.retry_after_s == pytest.approx(0.5, abs=0.02)
    assert ctl.counters(model).inflight == 4
    held = ctl.acquire(model, "b", 1, reserve_s=0.0)  # no reserve: refused, nothing booked
    assert held.permit is None and held.retry_after_s > 1.0


def test_inflight_waiters_poll_slower_when_many_wait_on_redis(client: redis.Redis) -> None:
    ctl, model = controller(client), spec(max_inflight=1)
    for _ in range(5):  # a release every ~40 ms
        permit = ctl.acquire(model, "a", 1).permit
        assert permit is not None
        time.sleep(0.04)
        ctl.finish(model, permit, Outcome(used_tokens=1))
    assert ctl.acquire(model, "a", 1).permit is not None
    hints = [ctl.acquire(model, "a", 1, lease_id=f"w{i}").retry_after_s for i in range(60)]
    (state_key,) = ctl._keys(model.name, "state")
    gap_ms = float(client.hget(state_key, "release_dt") or 0)
    assert 40 <= gap_ms < 1000  # the mean time between the releases above
    assert hints[0] == pytest.approx(0.05)
    assert hints[5] == pytest.approx(max(0.05, min(1.0, 5 * gap_ms / 2000)), abs=1e-3)
    assert hints[59] == pytest.approx(1.0)


def test_pause_left_on_redis_time(client: redis.Redis) -> None:
    ctl, model = controller(client), spec()
    assert ctl.pause_left_s(model) == 0.0
    permit = ctl.acquire(model, "a", 1).permit
    assert permit is not None
    ctl.finish(model, permit, Outcome(used_tokens=0, rate_limited=True, retry_after_s=3.0))
    assert 2.5 < ctl.pause_left_s(model) <= 3.0
