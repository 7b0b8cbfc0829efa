"""What only the Redis controller has: one cluster slot per model, and waiter hints from
the release gaps on Redis TIME (the shared rules: test_admission_contract.py)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis

from swarm.calls.admission import AdmissionPolicy, Outcome, Refusal
from swarm.calls.admission.base import Ask
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


def test_keys_share_one_cluster_slot(client: redis.Redis) -> None:
    ctl, model = controller(client), spec()
    permit = ctl.acquire(model, Ask("a", 1)).permit
    assert permit is not None
    ctl.finish(model, permit, Outcome(used_tokens=0, rate_limited=True, exhausted=True))
    assert ctl.acquire(spec(rpm=6_000_000), Ask("b", 1)).reason is Refusal.PAUSED  # a waiter
    time.sleep(0.01)
    keys = [k.decode() for k in client.keys("{llm:*")]
    assert len(keys) >= 4
    assert len({k[: k.index("}") + 1] for k in keys}) == 1


def test_the_tenants_hash_expires_after_its_use_has_decayed(client: redis.Redis) -> None:
    ctl, model = controller(client, tenant_window_s=2.0, lease_s=5.0), spec()
    permit = ctl.acquire(model, Ask("a", 100)).permit
    assert permit is not None
    [key] = [k for k in client.keys("{llm:*}:tenants")]
    assert 0 < client.pttl(key) <= 5_000 + 10 * 2_000
    ctl.finish(model, permit, Outcome(used_tokens=300))
    assert 0 < client.pttl(key) <= 5_000 + 10 * 2_000


def test_inflight_waiters_poll_slower_when_many_wait_on_redis(client: redis.Redis) -> None:
    ctl, model = controller(client), spec(max_inflight=1)
    for _ in range(5):  # a release every ~40 ms
        permit = ctl.acquire(model, Ask("a", 1)).permit
        assert permit is not None
        time.sleep(0.04)
        ctl.finish(model, permit, Outcome(used_tokens=1))
    assert ctl.acquire(model, Ask("a", 1)).permit is not None
    hints = [ctl.acquire(model, Ask("a", 1, lease_id=f"w{i}")).retry_after_s for i in range(60)]
    (state_key,) = ctl.args.keys(model.name, "state")
    gap_ms = float(client.hget(state_key, "release_dt") or 0)
    assert 40 <= gap_ms < 1000  # the mean time between the releases above
    assert hints[0] == pytest.approx(0.05)
    assert hints[5] == pytest.approx(max(0.05, min(1.0, 5 * gap_ms / 2000)), abs=1e-3)
    assert hints[59] == pytest.approx(1.0)


def test_a_renewed_permit_outlives_its_lease_and_comes_back_once_renewals_stop(
    client: redis.Redis,
) -> None:
    """A worker's heartbeat renews its permits (keep_held): a call longer than the lease
    keeps its permit; a killed worker's permit comes back a lease after its last renewal."""
    ctl, model = controller(client, lease_s=1.0), spec(max_inflight=1)
    held = ctl.acquire(model, Ask("j", 1)).permit
    assert held is not None
    for _ in range(4):  # 2 s of a call in flight, renewed every third of a lease
        time.sleep(1 / 3)
        assert ctl.keep_held() == 1
        time.sleep(1 / 3)
        assert ctl.keep_held() == 1
        assert ctl.acquire(model, Ask("j", 1)).permit is None  # still held: at the limit
    # The worker died: no renewal; the permit is purged by the next acquire after its lease.
    deadline = time.monotonic() + 10
    while (other := ctl.acquire(model, Ask("j", 1)).permit) is None:
        assert time.monotonic() < deadline, "the dead worker's permit never came back"
        time.sleep(0.05)
    ctl.finish(model, other, Outcome(used_tokens=1))
    ctl.finish(model, held, Outcome(used_tokens=1))  # it woke up: nothing to give back
    assert ctl.keep_held() == 0
    assert ctl.counters(model).inflight == 0
