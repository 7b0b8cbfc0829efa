"""Self-test of the integration Redis fixtures (tests/integration/conftest.py)."""

from __future__ import annotations

import os
import uuid

import procs


def test_redis_round_trip(redis_server: procs.RedisServer | procs.ExternalRedis) -> None:
    key, value = f"infra:{uuid.uuid4().hex}", uuid.uuid4().hex
    c = redis_server.client()
    try:
        assert c.set(key, value, ex=60)
        assert c.get(key) == value
    finally:
        c.delete(key)
        c.close()


def test_private_server_is_not_the_shared_6379(
    redis_server: procs.RedisServer | procs.ExternalRedis,
) -> None:
    if os.environ.get("SWARM_TEST_REDIS_URL"):
        assert isinstance(redis_server, procs.ExternalRedis)
        return
    assert isinstance(redis_server, procs.RedisServer)
    assert redis_server.port != procs.FORBIDDEN_PORT
    assert redis_server.url == f"redis://127.0.0.1:{redis_server.port}/0"
    assert redis_server.alive


def test_redis_url_is_fresh(redis_url: str) -> None:
    import redis

    c = redis.Redis.from_url(redis_url)
    try:
        assert c.dbsize() == 0
        c.set("infra:leftover", "1")  # the next test's redis_url must not see it
    finally:
        c.close()


def test_redis_url_is_fresh_again(redis_url: str) -> None:
    import redis

    c = redis.Redis.from_url(redis_url)
    try:
        assert c.dbsize() == 0
    finally:
        c.close()
