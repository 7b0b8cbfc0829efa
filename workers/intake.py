"""Intake counted in nodes: a worker takes another message only while its node threads can
run the nodes it already holds, on the Redis broker and on RabbitMQ.

Celery counts prefetch in messages (``-c`` x multiplier). A swarm.subagents message carries
up to 16 nodes (swarm.jobs.fanout), so a ``-c 50`` worker may take 50 messages, 800 nodes, for
its 100 node threads while the other workers run out of work: the job's tail then runs on
one worker (ops/bench/results/README.md has what the sweep measured).

A message held by the worker (Celery's ``reserved_requests``: received, not yet finished)
costs ``max(k, per_message)`` units, where ``k`` is its node count and ``per_message`` is
node threads / task threads (a message also takes a task thread: single-node messages
keep Celery's prefetch of ``-c``). Each node that ends gives one unit back down to
``per_message``, so a batch waiting for its slowest node does not hold the threads its
finished nodes freed. The worker takes another message while the units held are below its
node threads, so it holds at most node threads - 1 + one message's nodes.

How the worker refuses a message depends on the transport:

- kombu's virtual transports (Redis; the embedded mode's memory transport) ask
  ``channel.qos.can_consume()`` before every fetch; Celery's own ``worker_disable_prefetch``
  wraps the same method, and so does this step, adding the node count to it.
- RabbitMQ (py-amqp) pushes messages up to the channel's prefetch count: the prefetch
  follows the count instead, the messages held plus one while there is room
  (workers/prefetch.py). With quorum queues RabbitMQ cannot change a running consumer's
  prefetch: the worker keeps Celery's prefetch of ``-c`` messages and logs so at INFO.

Nothing here can stop a worker for good: the count is rebuilt from Celery's own set of
held requests on every check, so a message that ends in any way stops counting, and a count
that fails falls back to Celery's prefetch.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Iterable, Sequence
from types import MethodType
from typing import Any

from celery import bootsteps
from celery.worker import state

from swarm.jobs.queueing import SUBAGENTS_TASK
from workers import prefetch, process

log = logging.getLogger(__name__)
SNAPSHOT_TRIES = 3
"""Tries to copy Celery's held-request set while task threads change it."""


def message_cost(task_name: str, args: Sequence[Any], per_message: int) -> int:
    """Units a held message costs: its nodes, at least ``per_message``."""
    nodes = 1
    if task_name == SUBAGENTS_TASK and len(args) > 1 and isinstance(args[1], list | tuple):
        nodes = len(args[1])
    return max(nodes, per_message)


class NodeIntake:
    """The node count of one worker process (thread-safe)."""

    def __init__(self, node_threads: int, task_threads: int) -> None:
        self.capacity = node_threads
        self.per_message = max(1, math.ceil(node_threads / max(1, task_threads)))
        self.on_release: Callable[[], None] = lambda: None
        """Called (in the node's thread) after a node gave a unit back: the transport's hook."""
        self._released: dict[str, int] = {}
        self._lock = threading.Lock()

    def node_done(self, request_id: str, nodes: int) -> None:
        """One node of the message ``request_id`` (of ``nodes`` nodes) ended."""
        spare = max(nodes, self.per_message) - self.per_message
        with self._lock:
            done = self._released.get(request_id, 0)
            released = done < spare
            if released:
                self._released[request_id] = done + 1
        if released:
            self.on_release()

    def held(self, requests: Iterable[Any]) -> int:
        """Units the held ``requests`` (Celery Request objects) cost now."""
        total, live = 0, set()
        with self._lock:
            for req in requests:
                rid = str(req.id)
                live.add(rid)
                cost = message_cost(str(req.name), req.args or (), self.per_message)
                total += cost - self._released.get(rid, 0)
            for rid in [r for r in self._released if r not in live]:
                del self._released[rid]
        return total

    def can_take(self, requests: Callable[[], Iterable[Any]]) -> bool:
        """True while the held messages cost less than the node threads (virtual transports:
        asked before each fetch)."""
        counted = self._count(requests)
        return counted is None or counted[1] < self.capacity

    def wanted(self, requests: Callable[[], Iterable[Any]]) -> int | None:
        """Messages the worker may hold unacknowledged (AMQP's prefetch count): those it
        holds, plus one while they cost less than the node threads; None if the count failed
        (Celery's prefetch holds)."""
        counted = self._count(requests)
        if counted is None:
            return None
        messages, units = counted
        return messages + (1 if units < self.capacity else 0)

    def _count(self, requests: Callable[[], Iterable[Any]]) -> tuple[int, int] | None:
        """(messages, units) held, or None when the count cannot be had."""
        for _ in range(SNAPSHOT_TRIES):
            try:
                snapshot = list(requests())
            except RuntimeError:  # the set changed size while it was copied: try again
                continue
            try:
                return len(snapshot), self.held(snapshot)
            except Exception:  # never stop the consumer over the count: Celery's prefetch holds
                log.exception("swarm: node count failed; taking messages by Celery's prefetch")
                return None
        return None


_intake: NodeIntake | None = None


def current() -> NodeIntake | None:
    """This worker's intake, once its consumer started (None in the embedded mode)."""
    return _intake


def node_done_callback(request_id: str | None, nodes: int) -> Callable[[], None] | None:
    """What a batched task calls as each of its ``nodes`` nodes ends (None: nothing)."""
    intake = _intake
    if intake is None or request_id is None:
        return None
    return lambda: intake.node_done(request_id, nodes)


class NodeIntakeStep(bootsteps.StartStopStep):  # type: ignore[misc]  # celery is untyped
    """Consumer bootstep: the node count on the task consumer, by its transport."""

    requires = ("celery.worker.consumer.tasks:Tasks",)

    def start(self, c: Any) -> None:
        """Install on the (re)started task consumer: Redis (virtual) or AMQP transport."""
        global _intake
        task_threads = int(getattr(c.pool, "num_processes", 0) or c.app.conf.worker_concurrency)
        settings = process.get().settings
        threads = process.node_threads(settings.node_threads, task_threads)
        intake = _intake if _intake and _intake.capacity == threads else None
        intake = intake or NodeIntake(threads, task_threads)
        qos = getattr(getattr(c.task_consumer, "channel", None), "qos", None)
        if qos is not None and hasattr(qos, "can_consume"):
            _on_fetch(qos, intake)
        elif c.connection.transport.driver_type == "amqp":
            wake = prefetch.install(c, lambda: intake.wanted(lambda: state.reserved_requests))
            if wake is None:
                return
            intake.on_release = wake
        else:
            log.info("swarm: node-counted intake needs the Redis or AMQP transport; not installed")
            return
        _intake = intake


def _on_fetch(qos: Any, intake: NodeIntake) -> None:
    """Virtual transports: the node count joins ``qos.can_consume``, asked before each fetch."""
    original = qos.can_consume

    def can_consume(_qos: Any) -> bool:
        return bool(original()) and intake.can_take(lambda: state.reserved_requests)

    qos.can_consume = MethodType(can_consume, qos)
