"""The census of a job's messages in kombu's Redis layout (on fakeredis): what it parses,
which lists it reads, paging, and the cap past which absence proves nothing."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

import fakeredis
import pytest

from swarm.jobs import broker_census
from swarm.jobs.broker_census import (
    AGGREGATION,
    Census,
    Sighting,
    queue_keys,
    restore,
    sighting,
    take_census,
)
from swarm.jobs.queueing import AGGREGATE_TASK, SUBAGENT_TASK, SUBAGENTS_TASK, WATCH_TASK

SEP = "\x06\x16"
QUEUE = "llm.m"


def message(task: str, task_id: str, args: list[Any], priority: int = 0) -> dict[str, Any]:
    """A task message as kombu's Redis transport stores it (body base64-encoded JSON)."""
    body = base64.b64encode(json.dumps([args, {}, {"chord": None}]).encode()).decode()
    return {
        "body": body,
        "content-encoding": "utf-8",
        "content-type": "application/json",
        "headers": {"lang": "py", "task": task, "id": task_id, "argsrepr": "job=..."},
        "properties": {
            "body_encoding": "base64",
            "delivery_tag": f"tag-{task_id}",
            "priority": priority,
            "delivery_info": {"exchange": QUEUE, "routing_key": QUEUE},
        },
    }


@dataclass
class FakeQoS:
    restored: list[tuple[str, bool]]

    def restore_by_tag(self, tag: str, leftmost: bool = False) -> None:
        self.restored.append((tag, leftmost))


@dataclass
class FakeChannel:
    """The attributes of a kombu Redis channel a census reads."""

    client: Any
    qos: FakeQoS
    priority_steps: tuple[int, ...] = (0, 3, 6, 9)
    sep: str = SEP
    unacked_key: str = "unacked"
    unacked_index_key: str = "unacked_index"


@pytest.fixture
def channel() -> FakeChannel:
    return FakeChannel(fakeredis.FakeRedis(), FakeQoS([]))


def deliver(channel: FakeChannel, payload: dict[str, Any], at: float) -> str:
    """Record ``payload`` as unacked, as QoS.append does."""
    tag = str(payload["properties"]["delivery_tag"])
    channel.client.zadd("unacked_index", {tag: at})
    channel.client.hset("unacked", tag, json.dumps([payload, QUEUE, QUEUE]))
    return tag


def test_a_sighting_is_a_sub_agent_message_of_the_job_with_its_nodes() -> None:
    one = json.dumps(message(SUBAGENT_TASK, "j1-n0", ["j1", "n0", None]))
    assert sighting(one, "j1") == Sighting("j1-n0", ("n0",))
    many = json.dumps([message(SUBAGENTS_TASK, "j1-n1-n3", ["j1", ["n1", "n2", "n3"]]), "x", "y"])
    assert sighting(many.encode(), "j1") == Sighting("j1-n1-n3", ("n1", "n2", "n3"))
    assert sighting(one, "j2") is None  # another job's
    assert sighting(json.dumps(message(WATCH_TASK, "j1-watch", ["j1", None])), "j1") is None
    assert sighting('{"j1": "not a message"}', "j1") is None
    results = [{"job_id": "j1", "nodes": 1}]
    aggregation = json.dumps(message(AGGREGATE_TASK, "j1-aggregate", [results, "j1"]))
    assert sighting(aggregation, "j1") == Sighting("j1-aggregate", (AGGREGATION,))
    other = json.dumps(message(AGGREGATE_TASK, "j2-aggregate", [[{"job_id": "j1"}], "j2"]))
    assert sighting(other, "j1") is None


def test_queue_keys_follow_kombus_priority_lists() -> None:
    assert queue_keys("q", (0, 3, 6, 9), SEP) == ["q", f"q{SEP}3", f"q{SEP}6", f"q{SEP}9"]


def test_the_census_reads_every_priority_list_in_pages_and_the_unacked_hash(
    channel: FakeChannel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(broker_census, "PAGE", 3)
    for i in range(7):  # other jobs' messages around the job's
        channel.client.lpush(QUEUE, json.dumps(message(SUBAGENT_TASK, f"k-n{i}", ["k", f"n{i}"])))
    channel.client.lpush(QUEUE, json.dumps(message(SUBAGENT_TASK, "j-n0", ["j", "n0"])))
    channel.client.lpush(f"{QUEUE}{SEP}6", json.dumps(message(SUBAGENT_TASK, "j-n1", ["j", "n1"])))
    tag = deliver(channel, message(SUBAGENTS_TASK, "j-n2-n3", ["j", ["n2", "n3"]]), 100.0)
    deliver(channel, message(SUBAGENT_TASK, "k-n9", ["k", "n9"]), 100.0)

    census = take_census(channel, "j", [QUEUE])
    assert census.complete
    assert sorted(s.task_id for s in census.queued) == ["j-n0", "j-n1"]
    assert census.unacked == (Sighting("j-n2-n3", ("n2", "n3"), tag, 100.0),)
    assert census.nodes() == {"n0", "n1", "n2", "n3"}


def test_a_list_over_the_cap_makes_the_census_incomplete(channel: FakeChannel) -> None:
    for i in range(5):
        channel.client.lpush(QUEUE, json.dumps(message(SUBAGENT_TASK, f"j-n{i}", ["j", f"n{i}"])))
    census = take_census(channel, "j", [QUEUE], cap=4)
    assert census == Census((), (), complete=False)
    assert take_census(channel, "j", [QUEUE], cap=5).complete


def test_restore_puts_the_message_back_at_the_head_of_its_queue(channel: FakeChannel) -> None:
    restore(channel, "t1")
    assert channel.qos.restored == [("t1", False)]  # RPUSH: BRPOP takes it next
