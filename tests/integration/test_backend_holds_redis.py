"""The backend holds in Redis (swarm.store.backend_holds): what one worker records, every
worker reads, and resume clears."""

from __future__ import annotations

import pytest
import redis

from swarm.records import ErrorKind
from swarm.store.backend_holds import Hold, RedisBackendHolds

pytestmark = pytest.mark.integration

OUTAGE = Hold(ErrorKind.OUTAGE, "APIConnectionError: Connection error.", 1.0, 121.0)


def holds(url: str) -> RedisBackendHolds:
    return RedisBackendHolds(redis.Redis.from_url(url))


def test_a_hold_is_seen_by_every_worker_and_released(redis_url: str) -> None:
    one, two = holds(redis_url), holds(redis_url)
    hold = Hold(ErrorKind.INSUFFICIENT_BALANCE, "HTTP 429 exceeded_current_quota_error: x", 5.0)
    one.hold("default", hold, 60)
    assert two.get("default") == hold and two.get("other") is None
    two.release(["default"])
    assert one.get("default") is None


def test_an_outage_needs_several_calls_and_ends_with_an_answer(redis_url: str) -> None:
    one, two = holds(redis_url), holds(redis_url)
    options = {"window_s": 10.0, "min_calls": 3, "ttl_s": 30.0}
    for _ in range(5):  # one call failing again and again is not an outage
        assert one.connect_failed("b", "j:n0", OUTAGE, **options) is None
    assert two.connect_failed("b", "j:n1", OUTAGE, **options) is None
    assert one.connect_failed("b", "j:n2", OUTAGE, **options) == OUTAGE
    later = Hold(ErrorKind.OUTAGE, "later", 2.0, 122.0)
    assert two.connect_failed("b", "j:n3", later, **options) == OUTAGE  # the first one stays
    assert one.take_probe("b", 5.0) and not two.take_probe("b", 5.0)
    two.recovered("b")
    assert one.get("b") is None
    assert one.connect_failed("b", "j:n4", OUTAGE, **options) is None  # failures forgotten
