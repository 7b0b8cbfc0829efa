"""Group commit (swarm.store.group_commit): concurrent writes in one round trip, each writer
given its own replies, a failure kept to the writes it touched."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from redis.exceptions import DataError

from swarm.store.group_commit import GroupCommit, _Write


class Pipe:
    """A pipeline stand-in: commands are strings, a command's reply is its upper case."""

    def __init__(self) -> None:
        self.command_stack: list[str] = []

    def add(self, command: str) -> None:
        self.command_stack.append(command)


class Server:
    """Sends a pipeline: records each batch; the first one waits until ``release`` is set."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.first_sent = threading.Event()
        self.release = threading.Event()
        self.fail_with: Exception | None = None

    def send(self, build: Callable[[Any], None]) -> list[Any]:
        pipe = Pipe()
        build(pipe)
        self.batches.append(list(pipe.command_stack))
        if len(self.batches) == 1:
            self.first_sent.set()
            self.release.wait(10)
        if self.fail_with is not None:
            raise self.fail_with
        if "bad" in pipe.command_stack:
            raise DataError("Invalid input of type: 'NoneType'")
        return [command.upper() for command in pipe.command_stack]


def adds(*commands: str) -> Callable[[Any], None]:
    def build(pipe: Any) -> None:
        for command in commands:
            pipe.add(command)

    return build


def in_threads(
    group: GroupCommit, builds: list[Callable[[Any], None]]
) -> tuple[list[Any], list[threading.Thread]]:
    """Each build written from its own thread; their outcomes (replies or the error)."""
    outcomes: list[Any] = [None] * len(builds)

    def write(i: int) -> None:
        try:
            outcomes[i] = group.write(builds[i])
        except Exception as exc:
            outcomes[i] = exc

    threads = [threading.Thread(target=write, args=(i,)) for i in range(len(builds))]
    for thread in threads:
        thread.start()
    return outcomes, threads


def wait_queued(group: GroupCommit, n: int) -> None:
    for _ in range(1000):
        with group._lock:
            if len(group._queue) >= n:
                return
        threading.Event().wait(0.005)
    raise AssertionError(f"{n} writes never queued")


def test_a_lone_write_is_sent_at_once_with_its_replies() -> None:
    server = Server()
    server.release.set()
    group = GroupCommit(server.send)
    assert group.write(adds("a", "b")) == ["A", "B"]
    assert group.write(adds("c")) == ["C"]
    assert server.batches == [["a", "b"], ["c"]]


def test_writes_that_arrive_during_a_round_trip_go_together_in_the_next() -> None:
    server = Server()
    group = GroupCommit(server.send)
    first, first_threads = in_threads(group, [adds("x1", "x2")])
    assert server.first_sent.wait(10)
    rest, threads = in_threads(group, [adds(f"w{i}a", f"w{i}b") for i in range(5)])
    wait_queued(group, 5)
    server.release.set()
    for thread in [*first_threads, *threads]:
        thread.join(10)
    assert first == [["X1", "X2"]]
    assert rest == [[f"W{i}A", f"W{i}B"] for i in range(5)]
    assert len(server.batches) == 2 and sorted(server.batches[1]) == sorted(
        f"w{i}{s}" for i in range(5) for s in "ab"
    )


def test_a_write_whose_commands_cannot_be_built_fails_alone() -> None:
    server = Server()
    server.release.set()
    group = GroupCommit(server.send)

    def broken(pipe: Any) -> None:
        pipe.add("half")
        raise ValueError("no such node")

    with pytest.raises(ValueError, match="no such node"):
        group.write(broken)
    first, threads = in_threads(group, [adds("a")])
    threads[0].join(10)
    assert first == [["A"]]
    assert server.batches == [[], ["a"]]  # the broken write's half was taken back


def test_a_lost_round_trip_fails_the_writes_it_carried_and_no_other() -> None:
    server = Server()
    group = GroupCommit(server.send)
    first, first_threads = in_threads(group, [adds("x")])
    assert server.first_sent.wait(10)
    rest, threads = in_threads(group, [adds("y"), adds("z")])
    wait_queued(group, 2)
    server.fail_with = ConnectionError("connection reset")
    server.release.set()
    for thread in [*first_threads, *threads]:
        thread.join(10)
    assert all(isinstance(outcome, ConnectionError) for outcome in [*first, *rest])
    server.fail_with = None
    assert group.write(adds("after")) == ["AFTER"]


def test_a_value_redis_cannot_take_fails_only_the_write_that_sent_it() -> None:
    """Refused before anything is sent (redis-py's DataError): the batch's writes are sent
    one by one, and only the write with the bad value fails."""
    server = Server()
    group = GroupCommit(server.send)
    first, first_threads = in_threads(group, [adds("x")])
    assert server.first_sent.wait(10)
    rest, threads = in_threads(group, [adds("y"), adds("bad"), adds("z")])
    wait_queued(group, 3)
    server.release.set()
    for thread in [*first_threads, *threads]:
        thread.join(10)
    assert first == [["X"]]
    assert rest[0] == ["Y"] and rest[2] == ["Z"]
    assert isinstance(rest[1], DataError)


def test_a_writer_interrupted_while_queued_is_taken_out_and_the_others_go_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ctrl-C reaches a main thread waiting in the queue: its write is withdrawn (never
    sent), and the writes queued after it are still sent and answered."""
    server = Server()
    group = GroupCommit(server.send)
    first, first_threads = in_threads(group, [adds("x")])
    assert server.first_sent.wait(10)
    wait = _Write.wait

    def interrupted(self: _Write) -> None:
        if self.build is quit_build:
            raise KeyboardInterrupt
        wait(self)

    quit_build = adds("never")
    monkeypatch.setattr(_Write, "wait", interrupted)
    with pytest.raises(KeyboardInterrupt):
        group.write(quit_build)
    rest, threads = in_threads(group, [adds("y")])
    wait_queued(group, 1)
    server.release.set()
    for thread in [*first_threads, *threads]:
        thread.join(10)
    assert (first, rest) == ([["X"]], [["Y"]])
    assert "never" not in [command for batch in server.batches for command in batch]
