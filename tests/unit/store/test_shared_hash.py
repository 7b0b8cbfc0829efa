"""SharedHash: throttled reads, writes with a TTL (a field put again within the period goes
out with the next write or read due), and Redis unreachable as no news."""

from __future__ import annotations

from typing import Any

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


def test_a_field_put_again_within_the_period_goes_out_with_the_next_write_due() -> None:
    client = fakeredis.FakeRedis()
    now = [0.0]
    shared = SharedHash(client, "k", "test", clock=lambda: now[0], every_s=1.0)
    shared.put("pace:m", "1")
    shared.put("pace:m", "2")
    shared.put("pace:m", "3")
    assert client.hget("k", "pace:m") == b"1"  # the first at once, the others kept
    shared.put("window:m", "4096")  # another field, not written for a period: at once
    assert client.hget("k", "window:m") == b"4096"
    assert client.hget("k", "pace:m") == b"3"  # what was kept went with it
    shared.put("pace:m", "4")
    now[0] = 1.0
    shared.put("pace:m", "5")  # a period after its last write: written, the latest
    assert client.hget("k", "pace:m") == b"5"
    assert 0 < client.ttl("k") <= TTL_S


def test_a_due_read_writes_what_was_kept_first_and_never_brings_back_an_older_value() -> None:
    client = fakeredis.FakeRedis()
    now = [0.0]
    shared = SharedHash(client, "k", "test", clock=lambda: now[0], every_s=1.0)
    shared.put("pace:m", "1")
    shared.put("pace:m", "2")  # kept in the process
    client.hset("k", "scale:m", "1.4")  # another worker's
    assert shared.read_due() == {"pace:m": "2", "scale:m": "1.4"}
    assert client.hget("k", "pace:m") == b"2"


class Gone(fakeredis.FakeRedis):
    """Every command fails as with Redis away, in a pipeline too."""

    def execute_command(self, *args: object, **options: object) -> object:
        raise redis.ConnectionError("Redis is away")

    def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> Any:
        pipe = super().pipeline(transaction, shard_hint)

        def away(raise_on_error: bool = True) -> list[Any]:
            raise redis.ConnectionError("Redis is away")

        pipe.execute = away  # type: ignore[method-assign]
        return pipe


def test_redis_unreachable_reads_nothing_new_and_drops_writes() -> None:
    now = [0.0]
    shared = SharedHash(Gone(), "k", "test", clock=lambda: now[0], every_s=1.0)
    shared.put("scale:m", "1.4")  # no exception
    shared.put("scale:m", "1.5")  # kept: written with the read, which fails
    assert shared.read_due() is None
    now[0] = 1.0
    assert shared.read_due() is None
