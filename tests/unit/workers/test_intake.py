"""The node count behind a worker's intake (workers/intake.py), on plain request records."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from swarm.jobs.queueing import AGGREGATE_TASK, SUBAGENT_TASK, SUBAGENTS_TASK
from workers.intake import NodeIntake, message_cost


@dataclass
class Req:
    id: str
    name: str
    args: tuple[Any, ...]


def batch(rid: str, nodes: int) -> Req:
    return Req(rid, SUBAGENTS_TASK, ("job", [f"n{i}" for i in range(nodes)]))


@pytest.mark.parametrize(
    ("name", "args", "per_message", "cost"),
    [
        (SUBAGENTS_TASK, ("job", ["a"] * 16), 2, 16),
        (SUBAGENTS_TASK, ("job", ["a"] * 3), 13, 13),
        (SUBAGENT_TASK, ("job", "n1"), 2, 2),
        (AGGREGATE_TASK, ([], "job"), 2, 2),
        (SUBAGENTS_TASK, (), 2, 2),
    ],
)
def test_a_message_costs_its_nodes_and_at_least_its_task_thread(
    name: str, args: tuple[Any, ...], per_message: int, cost: int
) -> None:
    assert message_cost(name, args, per_message) == cost


def test_a_worker_fetches_while_its_node_threads_have_room() -> None:
    intake = NodeIntake(node_threads=100, task_threads=50)  # 2 units per message
    assert intake.per_message == 2
    held = [batch(f"m{i}", 16) for i in range(6)]
    assert intake.held(held) == 96 and intake.can_take(lambda: held)
    held.append(batch("m6", 16))
    assert intake.held(held) == 112 and not intake.can_take(lambda: held)
    singles = [Req(f"s{i}", SUBAGENT_TASK, ("job", "n")) for i in range(50)]
    assert not intake.can_take(lambda: singles)  # -c 50 single-node messages: as Celery


def test_finished_nodes_give_their_threads_back_down_to_the_message() -> None:
    intake = NodeIntake(node_threads=16, task_threads=8)
    held = [batch("m0", 16)]
    assert not intake.can_take(lambda: held)
    intake.node_done("m0", 16)
    assert intake.held(held) == 15 and intake.can_take(lambda: held)
    for _ in range(30):  # a batch waiting for its slowest node holds one task thread
        intake.node_done("m0", 16)
    assert intake.held(held) == 2
    assert intake.held([]) == 0  # the message ended: its count is gone...
    assert intake.held(held) == 16  # ...and a redelivery of it counts whole again


def test_a_set_that_keeps_changing_never_stops_the_worker() -> None:
    intake = NodeIntake(node_threads=4, task_threads=2)

    def changing() -> list[Req]:
        raise RuntimeError("Set changed size during iteration")

    assert intake.can_take(changing)


def test_a_request_the_count_cannot_read_falls_back_to_celerys_prefetch() -> None:
    intake = NodeIntake(node_threads=4, task_threads=2)

    class Odd:
        id = "x"

        @property
        def name(self) -> str:
            raise AttributeError("no name")

    assert intake.can_take(lambda: [Odd()])


def test_a_worker_wants_the_messages_it_holds_and_one_more_while_there_is_room() -> None:
    intake = NodeIntake(node_threads=8, task_threads=4)
    released: list[int] = []
    intake.on_release = lambda: released.append(1)
    assert intake.wanted(list) == 1
    held = [batch("m0", 8)]
    assert intake.wanted(lambda: held) == 1  # 8 nodes for 8 node threads: full
    intake.node_done("m0", 8)
    assert intake.wanted(lambda: held) == 2 and released == [1]
    held.append(batch("m1", 8))
    assert intake.wanted(lambda: held) == 2  # 15 units: the bounded overshoot
    for _ in range(10):
        intake.node_done("m0", 8)
    assert len(released) == 6  # down to the message's own unit: nothing more to give back

    def broken() -> list[Req]:
        raise RuntimeError("Set changed size during iteration")

    assert intake.wanted(broken) is None
