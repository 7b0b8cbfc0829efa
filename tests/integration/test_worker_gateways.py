"""Workers register the gateway they call for as long as their heartbeat beats; a producer
with another one is told, once."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis

from swarm.store import gateways

pytestmark = pytest.mark.integration


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(redis_url)
    c.delete(gateways.KEY)
    yield c
    c.close()


def registration(client: redis.Redis, url: str, name: str = "w1:1") -> gateways.Registration:
    return gateways.Registration(client, url, ttl_s=10.0, name=name)


def test_a_producer_is_told_when_no_worker_calls_its_gateway(client: redis.Redis) -> None:
    assert gateways.mismatch("http://a/v1", gateways.worker_gateways(client)) is None  # none known
    registration(client, "http://workers-gw:8000/v1").publish()
    found = gateways.worker_gateways(client)
    assert found == {"http://workers-gw:8000/v1"}
    line = gateways.mismatch("http://other:9000/v1", found)
    assert line is not None and "http://workers-gw:8000/v1" in line and "\n" not in line
    assert gateways.mismatch("http://workers-gw:8000/v1/", found) is None


def test_a_registration_lapses_without_its_heartbeat_and_is_removed(client: redis.Redis) -> None:
    """A worker that stopped renewing (killed, cut off) drops out once its lease has run,
    and its field goes from the hash; a live worker beside it stays."""
    registration(client, "http://dead/v1", "w1:1").publish(now=time.time() - 11.0)
    registration(client, "http://live/v1", "w2:2").publish()
    assert gateways.worker_gateways(client) == {"http://live/v1"}
    assert set(client.hgetall(gateways.KEY)) == {b"w2:2"}


def test_a_renewed_registration_stays_live(client: redis.Redis) -> None:
    entry = registration(client, "http://gw/v1")
    entry.publish(now=time.time() - 9.0)
    entry.renew()  # the heartbeat's beat
    assert gateways.worker_gateways(client, now=time.time() + 5.0) == {"http://gw/v1"}


def test_a_worker_that_shuts_down_withdraws_at_once(client: redis.Redis) -> None:
    entry = registration(client, "http://gw/v1")
    entry.publish()
    entry.withdraw()
    assert gateways.worker_gateways(client) == set()


def test_an_older_workers_field_does_not_count(client: redis.Redis) -> None:
    """A field of the former layout (``<url> -> <time>``, kept for minutes after its worker
    stopped) is not a live worker, and is removed."""
    client.hset(gateways.KEY, "http://old/v1", f"{time.time():.3f}")
    assert gateways.worker_gateways(client) == set()
    assert client.hlen(gateways.KEY) == 0
