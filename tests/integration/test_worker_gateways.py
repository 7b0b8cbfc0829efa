"""Workers publish the gateway they call; a producer with another one is told."""

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


def test_a_producer_is_told_when_no_worker_calls_its_gateway(client: redis.Redis) -> None:
    assert gateways.mismatch("http://a/v1", gateways.worker_gateways(client)) is None  # none known
    gateways.keep_publishing(client, "http://workers-gw:8000/v1")
    found = gateways.worker_gateways(client)
    assert found == {"http://workers-gw:8000/v1"}
    line = gateways.mismatch("http://other:9000/v1", found)
    assert line is not None and "http://workers-gw:8000/v1" in line and "\n" not in line
    assert gateways.mismatch("http://workers-gw:8000/v1/", found) is None


def test_gateways_not_published_lately_do_not_count(client: redis.Redis) -> None:
    gateways.publish(client, "http://old/v1", now=time.time() - 10 * gateways.FRESH_S)
    assert gateways.worker_gateways(client) == set()
