"""Where a job's messages are in the Redis broker: queued, or delivered and unacked.

kombu's Redis transport (kombu/transport/redis.py, 5.x) keeps a message in one of:

    <queue>, <queue>\\x06\\x16<p>  list  waiting: LPUSH on publish, BRPOP takes the right end;
                                     one list per step of ``Channel.priority_steps`` (0 bare)
    unacked                      hash  delivery tag -> JSON [message, exchange, routing key]
    unacked_index                zset  delivery tag -> Unix time it was delivered

A consumer's BRPOP takes the message off its list and only then, in the consumer's
callback, records it as unacked (``QoS.append``: ZADD unacked_index + HSET unacked). A
worker killed between the two (the reply can sit unread in its socket) leaves the message
nowhere. An acked message leaves ``unacked``; a message restored after the visibility
timeout goes back to its list.

A census reads the lists of some queues and the unacked hash in pages of ``PAGE`` entries
(LRANGE, HSCAN), keeps the messages of one job (a substring test on the raw JSON, then a
parse of those only), and stops, incomplete, when a list or the hash is longer than
``CAP``: absence from an incomplete census proves nothing. Cost: one LLEN per priority list
and one HLEN, one LRANGE or HSCAN per page, one ZSCORE per unacked message of the job.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from swarm.jobs.queueing import AGGREGATE_TASK, BATCH_POLL_TASK, SUBAGENT_TASK, SUBAGENTS_TASK

log = logging.getLogger(__name__)
PAGE = 500
"""Entries one LRANGE or HSCAN reads."""
CAP = 10_000
"""A list or unacked hash longer than this is not read (the census is incomplete)."""
NODE_TASKS = frozenset({SUBAGENT_TASK, SUBAGENTS_TASK, BATCH_POLL_TASK})
"""Tasks whose arguments are ``(job, node or [nodes], ...)`` (a batch poll carries its file's)."""
AGGREGATION = "<aggregation>"
"""What an aggregation message carries in place of nodes (no node id has this form)."""


@dataclass(frozen=True)
class Sighting:
    """One message of the job found in the broker."""

    task_id: str
    """The message's task id (a retry or a re-sent copy has the same id)."""
    node_ids: tuple[str, ...]
    """The nodes it carries (an aggregation: ``(AGGREGATION,)``)."""
    tag: str | None = None
    """Its delivery tag, when it is in ``unacked`` (None: queued)."""
    delivered_at: float | None = None
    """Unix time it was delivered (its ``unacked_index`` score), when unacked."""


@dataclass(frozen=True)
class Census:
    """The job's sub-agent messages in the broker."""

    queued: tuple[Sighting, ...]
    """Messages waiting in a queue list."""
    unacked: tuple[Sighting, ...]
    """Messages delivered to a consumer and not acked."""
    complete: bool
    """False when a list or the unacked hash was over CAP and was not read."""

    def nodes(self) -> frozenset[str]:
        """Every node some message of the census carries."""
        return frozenset(n for s in (*self.queued, *self.unacked) for n in s.node_ids)


def sighting(raw: str | bytes, job_id: str) -> Sighting | None:
    """The job's sub-agent or aggregation message in a raw list entry or unacked value."""
    text = raw.decode() if isinstance(raw, bytes) else raw
    if job_id not in text:
        return None
    try:
        entry = json.loads(text)
        message = entry[0] if isinstance(entry, list) else entry
        headers = message["headers"]
        task = headers.get("task")
        if task not in NODE_TASKS and task != AGGREGATE_TASK:
            return None
        body = message["body"]
        if message.get("properties", {}).get("body_encoding") == "base64":
            body = base64.b64decode(body)
        args = json.loads(body)[0]
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        log.debug("swarm census: unreadable message (%s)", exc)
        return None
    carried = _carried(task, args, job_id)
    return None if carried is None else Sighting(str(headers["id"]), carried)


def _carried(task: str, args: Any, job_id: str) -> tuple[str, ...] | None:
    """The nodes a message's arguments carry, if it is the job's: ``(job, node)``,
    ``(job, [nodes])``, or the aggregation's ``(results, job)``."""
    if not isinstance(args, list) or len(args) < 2:
        return None
    if task == AGGREGATE_TASK:
        return (AGGREGATION,) if args[-1] == job_id else None
    if args[0] != job_id:
        return None
    nodes = args[1] if isinstance(args[1], list) else [args[1]]
    return tuple(str(n) for n in nodes)


def queue_keys(queue: str, steps: Sequence[int], sep: str) -> list[str]:
    """The lists of one queue: the bare name for priority 0, then one per priority step."""
    return [f"{queue}{sep}{step}" if step else queue for step in steps]


def take_census(channel: Any, job_id: str, queues: Sequence[str], cap: int = CAP) -> Census:
    """The job's messages in ``queues`` and in ``unacked`` of a kombu Redis ``channel``."""
    client = channel.client
    keys = [k for q in queues for k in queue_keys(q, channel.priority_steps, channel.sep)]
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.llen(key)
    pipe.hlen(channel.unacked_key)
    *lengths, unacked_len = pipe.execute()
    complete = max([*lengths, unacked_len]) <= cap
    queued = [s for key, n in zip(keys, lengths, strict=True) if n <= cap
              for s in _listed(client, key, n, job_id)]  # fmt: skip
    unacked = _unacked(channel, job_id) if unacked_len <= cap else []
    if not complete:
        log.debug("swarm census: job %s: a list or unacked is over %d entries", job_id, cap)
    return Census(tuple(queued), tuple(unacked), complete)


def _listed(client: Any, key: str, length: int, job_id: str) -> Iterator[Sighting]:
    for start in range(0, length, PAGE):
        for raw in client.lrange(key, start, start + PAGE - 1):
            found = sighting(raw, job_id)
            if found is not None:
                yield found


def _unacked(channel: Any, job_id: str) -> list[Sighting]:
    client = channel.client
    found: dict[str, Sighting] = {}
    cursor = 0
    while True:  # HSCAN may return an entry twice: keyed by tag
        cursor, page = client.hscan(channel.unacked_key, cursor, count=PAGE)
        for tag, raw in page.items():
            seen = sighting(raw, job_id)
            if seen is not None:
                found[tag.decode() if isinstance(tag, bytes) else str(tag)] = seen
        if not cursor:
            break
    pipe = client.pipeline(transaction=False)
    for tag in found:
        pipe.zscore(channel.unacked_index_key, tag)
    scores = pipe.execute() if found else []
    return [
        Sighting(s.task_id, s.node_ids, tag, None if score is None else float(score))
        for (tag, s), score in zip(found.items(), scores, strict=True)
    ]


def restore(channel: Any, tag: str) -> None:
    """Put an unacked message back at the head of its queue, as kombu's visibility restore
    does (``QoS.restore_by_tag``: one transaction WATCHing ``unacked`` takes it off the hash
    and the index and pushes it, so of two concurrent restores one pushes it)."""
    channel.qos.restore_by_tag(tag, leftmost=False)
