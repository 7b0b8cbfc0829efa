"""Countdowns on RabbitMQ quorum queues: RabbitMQ holds a countdown message, not a worker.

A consumer of a quorum queue has a per-consumer prefetch, which Celery cannot raise for a
message with an ETA: a countdown message delivered at once would sit in the worker's prefetch
window until its ETA, in the place of a task it could run. So with quorum queues Celery
(5.5 and later) sends a countdown through RabbitMQ's delay exchanges instead
(``kombu.transport.native_delayed_delivery``: 28 levels of TTL queues, one per bit of the
delay in seconds, then the exchange ``celery_delayed_delivery``, which each worker binds to
each queue's exchange at start). That needs topic exchanges (``declared_queues``) and three
things Celery's ``send_task`` does not do, which ``SwarmCelery.send_task`` adds:

- A countdown under a second fails (kombu counts the delay in whole seconds, ``int()``, and
  refuses 0): ValueError at the send, and a task retried so is rejected and lost. Countdowns
  go out rounded up to whole seconds: the message arrives once its ETA has passed.
- A retry (``Task.retry``, ``Task.signature_from_request``) carries the delivery's exchange
  and routing key but not its queue, so Celery's router adds the default queue, whose
  routing key the delay then uses: a retried task of ``llm.gemini-2.5-flash`` went to
  ``llm.kimi-k2.5``. The queue is taken back from the routing key (a delay's prefix
  stripped) and the delivery's exchange and key are dropped: the message goes out as its
  first send did, and a re-send of a delayed message (a take-over) is not delayed again.
- A producer that sends a countdown before any worker has declared the delay exchanges
  loses it, and RabbitMQ closes the channel, so the messages sent after it on that channel
  are lost too. The first countdown a process sends declares them (and binds the queues)
  first, as the worker does.
"""

from __future__ import annotations

import logging
import math
import re
import threading
from collections.abc import Collection, Mapping
from typing import Any

from celery import Celery
from celery.app import backends
from celery.utils.quorum_queues import detect_quorum_queues
from kombu.transport.native_delayed_delivery import (
    MAX_NUMBER_OF_BITS_TO_USE,
    bind_queue_to_native_delayed_delivery_exchange,
    declare_native_delayed_delivery_exchanges_and_queues,
)

from swarm.jobs.chord_backend import outage_safe

log = logging.getLogger(__name__)

DELAY_PREFIX = re.compile(rf"^(?:[01]\.){{{MAX_NUMBER_OF_BITS_TO_USE}}}")
"""The delay (one bit a word) kombu puts before a delayed message's routing key."""
DELIVERY_OPTIONS = ("exchange", "routing_key", "exchange_type")
"""Options that a retry copies from its delivery, dropped once its queue is known."""


def origin_queue(routing_key: object) -> str | None:
    """The queue a delivery's routing key names (swarm's queues are bound by their own
    name), a delay's prefix stripped; None without one."""
    if not isinstance(routing_key, str) or not routing_key:
        return None
    return DELAY_PREFIX.sub("", routing_key, count=1)


def pinned_to_queue(options: Mapping[str, Any], queues: Collection[str]) -> dict[str, Any]:
    """Send options with the queue a retry's delivery came from (``queue``, its exchange
    and routing key left to the queue), when they name no queue and their routing key
    names one of ``queues``; otherwise as they are."""
    if options.get("queue") is not None:
        return dict(options)
    queue = origin_queue(options.get("routing_key"))
    if queue is None or queue not in queues:
        return dict(options)
    kept = {key: value for key, value in options.items() if key not in DELIVERY_OPTIONS}
    return {**kept, "queue": queue}


def broker_countdown_s(countdown_s: float) -> float:
    """A positive countdown in the whole seconds RabbitMQ's delay queues count, rounded
    up (at least 1): the message arrives at its ETA or after, never held by the worker."""
    return float(max(1, math.ceil(countdown_s)))


class SwarmCelery(Celery):  # type: ignore[misc]  # Celery is untyped
    """Celery whose countdowns work on RabbitMQ quorum queues (see the module docstring);
    elsewhere (Redis, classic queues) only a retry's queue is made explicit. Its Redis
    result backend counts chord parts through an outage (swarm.jobs.chord_backend)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._delays_lock = threading.Lock()
        self._delays_declared = False

    def send_task(
        self, name: str, args: Any = None, kwargs: Any = None, countdown: Any = None, **options: Any
    ) -> Any:
        """Celery's ``send_task``, with the retry's queue pinned and, where RabbitMQ delays
        the message, the countdown in whole seconds and the delay exchanges declared."""
        options = pinned_to_queue(options, self.amqp.queues)
        if countdown is not None and countdown > 0 and self._delays_in_broker():
            countdown = broker_countdown_s(countdown)
            self._declare_delays()
        return super().send_task(name, args, kwargs, countdown=countdown, **options)

    def _get_backend(self) -> Any:
        """Celery's result backend for this app, a Redis one made ``outage_safe``."""
        backend, url = backends.by_url(self.backend_cls or self.conf.result_backend, self.loader)
        return outage_safe(backend)(app=self, url=url)

    def _delays_in_broker(self) -> bool:
        driver = self.connection_for_write().transport.driver_type
        return bool(detect_quorum_queues(self, driver)[0])

    def _declare_delays(self) -> None:
        with self._delays_lock:
            if self._delays_declared:
                return
            with self.connection_for_write() as conn:
                queue_type = self.conf.broker_native_delayed_delivery_queue_type
                declare_native_delayed_delivery_exchanges_and_queues(conn, queue_type)
                for queue in self.amqp.queues.values():
                    queue.bind(conn.default_channel).declare()
                    bind_queue_to_native_delayed_delivery_exchange(conn, queue)
            self._delays_declared = True
            log.debug("swarm: RabbitMQ's delay exchanges declared, %d queues bound to them",
                      len(self.amqp.queues))  # fmt: skip
