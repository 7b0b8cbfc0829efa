"""SharedHash: throttled reads, writes with a TTL, and Redis unreachable as no news."""

from __future__ import annotations

import fakeredis
import redis

from swarm.store.shared_hash import TTL_S, SharedHash


def test_reads_at_most_once_a_period_unless_asked_to_read_next() -> None:
    client = fakeredis.FakeRedis()
    now = [0.0]
    shared = SharedHash(client, "k", "test", clock=lambda: now[0], every_s=1.0)
    shared.put("window:m", "4096")
    assert shared.read_due() == {"window:m": "4096"}
    client.hset("k", "window:m", "2048")
    assert shared.read_due() is None  # read 0 s ago
    shared.read_next()
    assert shared.read_due() == {"window:m": "2048"}
    now[0] = 1.0
    assert shared.read_due() == {"window:m": "2048"}
    assert 0 < client.ttl("k") <= TTL_S


class Gone(fakeredis.FakeRedis):
    """Every command fails as with Redis away."""

    def execute_command(self, *args: object, **options: object) -> object:
        raise redis.ConnectionError("Redis is away")


def test_redis_unreachable_reads_nothing_new_and_drops_writes() -> None:
    shared = SharedHash(Gone(), "k", "test")
    shared.put("scale:m", "1.4")  # no exception
    assert shared.read_due() is None
