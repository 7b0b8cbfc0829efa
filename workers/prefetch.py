"""The node-counted intake on AMQP: the worker's broker prefetch follows the node count.

RabbitMQ pushes messages up to the channel's prefetch count of unacknowledged messages;
there is no fetch to refuse, as kombu's virtual transports have (workers/intake.py). So the
prefetch itself moves: it is the messages the worker holds plus one while its node threads
have room (``NodeIntake.wanted``), never more than Celery's own (``-c`` messages plus the
ETA messages it waits on), never 0 (unlimited in AMQP).

Only the consumer thread talks on the channel (Celery's own raising of the prefetch after a
reconnection, which runs in the acking pool thread, is off: swarm.jobs.queueing). Celery's
event loop already applies its ``c.qos`` whenever ``qos.value`` differs from what it last
sent (as for ETA tasks and the autoscaler); ``NodeQoS.value`` computes the count each time
it is read, so the loop applies it, and a node thread whose node ended only wakes the loop
(``Hub.call_soon``). A message that ends lowers the prefetch *before* its ack goes out (the
channel's ``basic_ack`` and ``basic_reject`` apply the QoS first, in the consumer thread),
or RabbitMQ would send a replacement into the slot the ack frees.

This needs channel-global QoS (RabbitMQ's ``global=true``: Celery uses it for classic
queues), which RabbitMQ changes for running consumers. With quorum queues Celery uses
per-consumer QoS, which RabbitMQ applies only to consumers started after it; there the
worker keeps Celery's prefetch and says so once at INFO.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from kombu.common import QoS

log = logging.getLogger(__name__)


def applied_prefetch(celery_prefetch: int, celery_base: int, wanted: int | None) -> int:
    """The prefetch count to send: Celery's own (``celery_base`` messages, ``-c``, plus one
    per ETA message it waits on) with the base lowered to the ``wanted`` messages, at least
    1. Celery's own when the count is unknown (None) or Celery's is 0 (unlimited)."""
    if not celery_prefetch or wanted is None:
        return celery_prefetch
    waiting = max(0, celery_prefetch - celery_base)
    return max(1, waiting + min(celery_base, wanted))


class NodeQoS(QoS):
    """Celery's task QoS whose ``value``, what Celery's loop applies, is lowered by the node
    count. ``own`` is Celery's number, moved by its own increments and decrements."""

    def __init__(
        self, celery: Any, base: Callable[[], int], wanted: Callable[[], int | None]
    ) -> None:
        self.own = 0
        self._base, self._wanted = base, wanted
        super().__init__(celery.callback, celery.value, celery.max_prefetch)  # type: ignore[no-untyped-call]
        self.prev = celery.prev

    @property
    def value(self) -> int:
        """The prefetch count Celery's loop applies (see ``applied_prefetch``)."""
        return applied_prefetch(self.own, self._base(), self._wanted())

    @value.setter
    def value(self, own: int) -> None:
        self.own = own

    def increment_eventually(self, n: int = 1) -> int:
        """Celery's increment (an ETA message waits), on its own number."""
        with self._mutex:
            if self.own:
                own = self.own + max(n, 0)
                self.own = own if self.max_prefetch is None else min(own, self.max_prefetch)
        return self.value

    def decrement_eventually(self, n: int = 1) -> int:
        """Celery's decrement (an ETA message is due), on its own number, at least 1."""
        with self._mutex:
            if self.own:
                self.own = max(1, self.own - n)
        return self.value

    def apply(self) -> None:
        """Send the prefetch count if it changed (consumer thread only)."""
        if self.prev != self.value:
            self.update()  # type: ignore[no-untyped-call]


def install(c: Any, wanted: Callable[[], int | None]) -> Callable[[], None] | None:
    """Make the consumer ``c``'s prefetch follow ``wanted`` (call from the consumer thread,
    after Celery's Tasks step). Returns what a node thread calls when a node ended, or None
    when the prefetch cannot follow (per-consumer QoS: quorum queues)."""
    if getattr(c, "qos_global", None) is not True:
        log.info(
            "swarm: node-counted intake off: per-consumer QoS (quorum queues) cannot change "
            "for a running consumer; Celery's prefetch of -c messages holds"
        )
        return None
    qos = c.qos = NodeQoS(c.qos, lambda: int(c.initial_prefetch_count or 0), wanted)
    apply = _while_current(c, qos)
    channel = c.task_consumer.channel
    consumer_thread = threading.get_ident()
    for name in ("basic_ack", "basic_reject"):
        setattr(channel, name, _qos_first(getattr(channel, name), apply, consumer_thread))
    apply()  # before the loop starts consuming: the first window is the node count's
    log.debug("swarm: node-counted prefetch on, now %s", qos.prev)
    return _waker(getattr(c, "hub", None), qos, apply)


def _while_current(c: Any, qos: NodeQoS) -> Callable[[], None]:
    """``qos.apply`` while ``qos`` is the consumer's: once the consumer restarted, Celery's
    QoS callback sends on the new channel, whose prefetch is the new QoS's to set."""

    def apply() -> None:
        if c.qos is qos:
            qos.apply()

    return apply


def _qos_first(
    send: Callable[..., Any], apply: Callable[[], None], thread: int
) -> Callable[..., Any]:
    """``send`` (an ack or reject) after ``apply``, in the consumer thread: the message has
    left Celery's held set, and its slot must not be refilled unless the count allows."""

    def send_after_qos(*args: Any, **kwargs: Any) -> Any:
        if threading.get_ident() == thread:
            apply()
        return send(*args, **kwargs)

    return send_after_qos


def _waker(hub: Any, qos: NodeQoS, apply: Callable[[], None]) -> Callable[[], None]:
    """What a node thread calls when a node ended: wake the consumer's loop to ``apply``
    the count if it changed (without a hub, Celery's loop sees it within its drain timeout)."""

    def wake() -> None:
        if hub is not None and qos.prev != qos.value:
            hub.call_soon(apply)

    return wake
