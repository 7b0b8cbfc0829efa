"""Durable writes (swarm.store.durable): tried again through an outage, within a bound."""

from __future__ import annotations

import fakeredis
import pytest
import redis

from swarm.store.durable import Durable


def test_a_write_without_wait_runs_its_commands_and_returns_their_results() -> None:
    client = fakeredis.FakeRedis(decode_responses=True)
    results = Durable(client).write(lambda pipe: (pipe.set("a", "1"), pipe.get("a")))
    assert results == [True, "1"]


def test_an_outage_is_waited_out_within_the_bound() -> None:
    calls: list[int] = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise redis.exceptions.ConnectionError("failover under way")
        return "written"

    assert Durable(fakeredis.FakeRedis(), outage_s=10).retrying(flaky) == "written"
    assert len(calls) == 3


def test_an_outage_longer_than_the_bound_is_the_callers() -> None:
    def down() -> None:
        raise redis.exceptions.ConnectionError("down")

    with pytest.raises(redis.exceptions.ConnectionError):
        Durable(fakeredis.FakeRedis(), outage_s=0.2).retrying(down)


def test_other_errors_are_not_tried_again() -> None:
    calls: list[int] = []

    def broken() -> None:
        calls.append(1)
        raise redis.exceptions.ResponseError("WRONGTYPE")

    with pytest.raises(redis.exceptions.ResponseError):
        Durable(fakeredis.FakeRedis(), outage_s=10).retrying(broken)
    assert len(calls) == 1
