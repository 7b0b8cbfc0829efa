"""Durable writes (swarm.store.durable): tried again through an outage, within a bound."""

from __future__ import annotations

import fakeredis
import pytest
import redis
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt

from swarm.store.durable import Durable, first_then


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


def test_first_then_builds_the_loop_only_after_a_failed_try() -> None:
    built: list[int] = []

    def loop() -> Retrying:
        built.append(1)
        return Retrying(retry=retry_if_exception_type(KeyError), reraise=True)

    assert first_then(lambda: "at once", loop) == "at once"
    assert built == []
    tries = iter([KeyError("first"), KeyError("second"), "third"])

    def flaky() -> str:
        outcome = next(tries)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    assert first_then(flaky, loop) == "third"
    assert built == [1]


def test_first_then_replays_the_first_error_to_the_loop_without_a_second_try() -> None:
    calls: list[int] = []
    seen: list[int] = []

    def broken() -> None:
        calls.append(1)
        raise ValueError("no")

    def loop() -> Retrying:
        return Retrying(
            stop=stop_after_attempt(2),
            retry=retry_if_exception_type(ValueError),
            before_sleep=lambda state: seen.append(state.attempt_number),
            sleep=lambda _s: None,
            reraise=True,
        )

    with pytest.raises(ValueError):
        first_then(broken, loop)
    assert calls == [1, 1]  # the first try and one retry: the replay is not a call
    assert seen == [1]  # the loop saw the first try's failure as its attempt 1
