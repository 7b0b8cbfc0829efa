"""The node-counted intake on AMQP (workers/prefetch.py): the prefetch arithmetic, Celery's
QoS with the count in it, and the order of a QoS change and an ack on the channel."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
from kombu.common import QoS

from workers.prefetch import NodeQoS, applied_prefetch, install


@pytest.mark.parametrize(
    ("celery_prefetch", "celery_base", "wanted", "applied"),
    [
        (4, 4, 1, 1),  # holds nothing yet: one message at a time
        (4, 4, 3, 3),  # holds 2 with room: one more
        (4, 4, 9, 4),  # never above Celery's own (-c messages)
        (6, 4, 2, 4),  # 2 ETA messages waiting keep their slots
        (4, 4, 0, 1),  # never 0: unlimited in AMQP
        (4, 4, None, 4),  # the count failed: Celery's prefetch
        (0, 0, 3, 0),  # Celery's prefetch is off (unlimited): left alone
    ],
)
def test_the_prefetch_is_celerys_lowered_to_what_the_node_count_wants(
    celery_prefetch: int, celery_base: int, wanted: int | None, applied: int
) -> None:
    assert applied_prefetch(celery_prefetch, celery_base, wanted) == applied


@dataclass
class Wire:
    """A channel and a hub that record what the consumer thread would send."""

    sent: list[tuple[str, Any]] = field(default_factory=list)
    soon: list[Any] = field(default_factory=list)

    def basic_qos(self, prefetch_count: int) -> None:
        self.sent.append(("qos", prefetch_count))

    def basic_ack(self, tag: str, multiple: bool = False) -> None:
        self.sent.append(("ack", tag))

    def basic_reject(self, tag: str, requeue: bool = False) -> None:
        self.sent.append(("reject", tag))

    def call_soon(self, callback: Any) -> None:
        self.soon.append(callback)


def consumer(wire: Wire, qos_global: bool = True) -> SimpleNamespace:
    """The parts of Celery's consumer the install touches, with ``-c 4``."""
    return SimpleNamespace(
        qos_global=qos_global,
        qos=QoS(wire.basic_qos, 4),
        initial_prefetch_count=4,
        task_consumer=SimpleNamespace(channel=wire),
        hub=wire,
    )


def test_celerys_own_changes_move_its_number_and_the_count_caps_what_is_sent() -> None:
    wire, wanted = Wire(), [1]
    qos = NodeQoS(QoS(wire.basic_qos, 4), lambda: 4, lambda: wanted[0])
    assert (qos.own, qos.value) == (4, 1)
    qos.increment_eventually()  # an ETA message arrived: it keeps its slot
    assert (qos.own, qos.value) == (5, 2)
    qos.decrement_eventually(9)  # ...and is due
    assert (qos.own, qos.value) == (1, 1)
    qos.value = 4  # Celery sets its number outright after a reconnect
    wanted[0] = 3
    qos.apply()
    qos.apply()
    assert (qos.own, wire.sent) == (4, [("qos", 3)])  # sent once, when it changed


def test_an_ended_message_lowers_the_prefetch_before_its_ack_frees_the_slot() -> None:
    wire, wanted = Wire(), [1]
    c = consumer(wire)
    wake = install(c, lambda: wanted[0])
    assert wake is not None and isinstance(c.qos, NodeQoS)
    assert wire.sent == [("qos", 1)]  # before the loop consumes: the count's first window
    wanted[0] = 2  # a node ended: room for one more message
    wake()
    assert len(wire.soon) == 1 and wire.sent == [("qos", 1)]  # the loop applies it
    wire.soon.pop()()
    wanted[0] = 1  # a message ended and left Celery's held set
    c.task_consumer.channel.basic_ack("t1")
    c.task_consumer.channel.basic_reject("t2", requeue=True)
    assert wire.sent == [("qos", 1), ("qos", 2), ("qos", 1), ("ack", "t1"), ("reject", "t2")]
    wake()
    assert wire.soon == []  # nothing changed: the loop is not woken
    c.qos = QoS(wire.basic_qos, 4)  # the consumer restarted (a new channel, a new QoS)
    wanted[0] = 3
    wake()
    c.task_consumer.channel.basic_ack("t3")  # a message of the old channel
    wire.soon.pop()()
    assert wire.sent[-2:] == [("reject", "t2"), ("ack", "t3")]  # the old QoS sends nothing


def test_per_consumer_qos_keeps_celerys_prefetch_and_says_why(
    caplog: pytest.LogCaptureFixture,
) -> None:
    wire = Wire()
    c = consumer(wire, qos_global=False)
    celery_qos = c.qos
    with caplog.at_level(logging.INFO, logger="workers.prefetch"):
        assert install(c, lambda: 1) is None
    assert c.qos is celery_qos and wire.sent == []
    assert "per-consumer QoS (quorum queues)" in caplog.text


def test_an_ack_after_a_reconnection_sends_nothing_on_the_channel_from_its_thread() -> None:
    """Celery's reconnection step lowers its prefetch and, by default, raises it again from
    each ack's callback in the acking (pool) thread; swarm's config turns that off, so only
    the consumer thread sets the count (workers/prefetch.py)."""
    from celery.worker.consumer.consumer import Consumer

    from swarm.catalog import load_catalog
    from swarm.jobs.queueing import celery_config
    from swarm.settings import Settings

    wire = Wire()
    conf = celery_config(Settings(broker_url="amqp://guest@localhost//"), load_catalog(None))
    restarted = SimpleNamespace(
        app=SimpleNamespace(conf=SimpleNamespace(**conf)),
        qos=QoS(wire.basic_qos, 1),
        _maximum_prefetch_restored=False,
        _new_prefetch_count=4,
        max_prefetch_count=50,
        initial_prefetch_count=1,
    )
    Consumer._restore_prefetch_count_after_connection_restart(restarted, None)  # an ack's callback
    assert wire.sent == [] and restarted.initial_prefetch_count == 1
    restarted.app.conf.worker_enable_prefetch_count_reduction = True  # Celery's default
    Consumer._restore_prefetch_count_after_connection_restart(restarted, None)
    assert wire.sent == [("qos", 4)]  # what the setting stops: basic_qos from the ack's thread
