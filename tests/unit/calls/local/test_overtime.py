"""Requests read past their node's deadline (swarm.calls.local.overtime): the node times out as
before, the request goes on for the grace, and a late ending is handed over once."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import httpx2
import openai
import pytest

from swarm.calls.local.overtime import Overtime, StillReading
from swarm.calls.request import Answer
from swarm.calls.retry_policy import BadResponseError, classify
from swarm.records import ErrorKind, Usage
from swarm.settings import Settings, load_settings

WAIT_S = 10.0
"""A generous deadline for a condition (never a timing bound)."""
ANSWER = Answer("late", Usage(prompt_tokens=7, completion_tokens=3), "stop")


class Lates:
    """The ``late`` hook: what ended after the deadline, and when it was told."""

    def __init__(self) -> None:
        self.outcomes: list[Answer | BaseException] = []
        self.latencies: list[float] = []
        self.told = threading.Event()

    def __call__(self, outcome: Answer | BaseException, latency_s: float) -> None:
        self.outcomes.append(outcome)
        self.latencies.append(latency_s)
        self.told.set()


def held(release: threading.Event, outcome: Answer | Exception = ANSWER) -> tuple[
    Callable[[float | None], Answer], list[tuple[str, float | None]]
]:  # fmt: skip
    """A request that ends (``outcome``) once ``release`` is set; records its thread's name
    and the read timeout it was sent with."""
    calls: list[tuple[str, float | None]] = []

    def send(read_timeout_s: float | None) -> Answer:
        calls.append((threading.current_thread().name, read_timeout_s))
        assert release.wait(WAIT_S)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    return send, calls


def released() -> threading.Event:
    event = threading.Event()
    event.set()
    return event


def test_an_answer_in_time_is_the_nodes_and_nothing_is_late() -> None:
    overtime, lates = Overtime(grace_s=30, max_requests=2), Lates()
    send, calls = held(released())
    assert overtime.send(send, 5.0, lates) is ANSWER
    [(thread, read_timeout_s)] = calls
    assert thread.startswith("overtime-") and read_timeout_s == 35.0  # deadline + grace
    assert lates.outcomes == []


def test_an_error_in_time_is_raised_to_the_node_as_it_was() -> None:
    overtime, lates = Overtime(grace_s=30, max_requests=2), Lates()
    error = BadResponseError("no choices", Usage(prompt_tokens=1))
    send, _ = held(released(), error)
    with pytest.raises(BadResponseError) as raised:
        overtime.send(send, 5.0, lates)
    assert raised.value is error and lates.outcomes == []


def test_past_the_deadline_the_node_times_out_and_the_answer_comes_late() -> None:
    overtime, lates = Overtime(grace_s=30, max_requests=2), Lates()
    release = threading.Event()
    send, calls = held(release)
    with pytest.raises(openai.APITimeoutError) as raised:
        overtime.send(send, 0.05, lates)
    assert classify(raised.value) is ErrorKind.TIMEOUT  # retried and paced as before
    assert lates.outcomes == []  # still reading
    release.set()
    assert lates.told.wait(WAIT_S)
    assert lates.outcomes == [ANSWER] and lates.latencies[0] >= 0.05
    assert calls[0][1] == pytest.approx(30.05)


def test_a_request_that_fails_late_is_told_too() -> None:
    overtime, lates = Overtime(grace_s=30, max_requests=2), Lates()
    release = threading.Event()
    error = openai.APITimeoutError(request=httpx2.Request("POST", "http://gw/v1"))
    send, _ = held(release, error)
    with pytest.raises(openai.APITimeoutError) as raised:
        overtime.send(send, 0.05, lates)
    release.set()
    assert lates.told.wait(WAIT_S)
    assert lates.outcomes == [error] and raised.value is not error  # the node's own timeout


def test_without_grace_the_request_runs_on_the_nodes_thread_as_before() -> None:
    overtime, lates = Overtime(grace_s=0, max_requests=64), Lates()
    send, calls = held(released())
    assert not overtime.enabled
    assert overtime.send(send, 5.0, lates) is ANSWER
    assert calls == [(threading.current_thread().name, None)]  # the client's own timeout


def test_beyond_the_bound_a_request_closes_at_its_deadline_as_before() -> None:
    overtime, lates = Overtime(grace_s=30, max_requests=1), Lates()
    release = threading.Event()
    slow, _ = held(release)
    with pytest.raises(openai.APITimeoutError):
        overtime.send(slow, 0.05, lates)  # reading past its deadline: the one slot
    send, calls = held(released())
    assert overtime.send(send, 5.0, lates) is ANSWER
    assert calls == [(threading.current_thread().name, None)]
    release.set()
    assert lates.told.wait(WAIT_S)
    deadline = time.monotonic() + WAIT_S
    calls.clear()
    while not calls or calls[-1][1] is None:  # the slot comes back once the late one ended
        assert time.monotonic() < deadline
        overtime.send(send, 5.0, lates)
    assert calls[-1][0].startswith("overtime-")


def test_threads_are_reused_never_more_than_the_bound() -> None:
    overtime, lates = Overtime(grace_s=30, max_requests=3), Lates()
    names = set()
    for _ in range(50):
        send, calls = held(released())
        overtime.send(send, 5.0, lates)
        names.add(calls[0][0])
    assert len({n for n in names if n.startswith("overtime-")}) <= 3


def test_settings_default_the_grace_to_forty_node_timeouts() -> None:
    assert Overtime.from_settings(Settings(node_timeout_s=10)).grace_s == 400.0
    off = Overtime.from_settings(Settings(overtime_grace_s=0))
    assert not off.enabled
    assert Overtime.from_settings(Settings(overtime_max=0)).enabled is False


def test_the_deprecated_abandoned_names_still_set_the_overtime(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("SWARM_ABANDONED_GRACE_S", "12")
    monkeypatch.setenv("SWARM_ABANDONED_MAX", "3")
    with caplog.at_level(logging.WARNING, logger="swarm.settings"):
        overtime = Overtime.from_settings(load_settings())
    assert (overtime.grace_s, overtime.max_requests) == (12.0, 3)
    assert "SWARM_ABANDONED_MAX is deprecated" in caplog.text
    monkeypatch.setenv("SWARM_OVERTIME_MAX", "5")  # the new name wins
    assert load_settings().overtime_max == 5


def test_the_nodes_timeout_says_when_the_request_ends() -> None:
    overtime, lates = Overtime(grace_s=30, max_requests=2), Lates()
    release = threading.Event()
    send, _ = held(release)
    with pytest.raises(StillReading) as raised:
        overtime.send(send, 0.05, lates)
    ended: list[Answer | BaseException] = []
    raised.value.when_ended(ended.append)
    assert ended == []  # the gateway is still computing it
    release.set()
    assert lates.told.wait(WAIT_S)
    deadline = time.monotonic() + WAIT_S
    while not ended and time.monotonic() < deadline:
        time.sleep(0.01)
    assert ended == [ANSWER]
    raised.value.when_ended(ended.append)  # asked once it has ended: told at once
    assert ended == [ANSWER, ANSWER]
