"""kombu's Redis Sentinel transport, with a closed channel's Redis access failing as a
connection error.

When the primary dies, Celery's consumer closes its broker connection and reconnects
(through the sentinels, to the promoted replica). Closing the old channel puts its
unacknowledged messages back in their queues, which needs a Redis client; kombu's Sentinel
channel builds one from its transport's connection, which is gone by then, and raises
AttributeError ('NoneType' object has no attribute 'hostname', kombu 5.x). Celery only
ignores connection errors there, so the worker stopped. Here that access raises redis-py's
ConnectionError instead: the close goes on, the worker reconnects, and the messages stay
in the unacked index, which every worker's restore sweep puts back after the visibility
timeout (as a killed worker's). Selected with ``broker_transport`` for ``sentinel://``
broker URLs (swarm.jobs.queueing).
"""

from __future__ import annotations

from typing import Any

import redis
from kombu.transport import redis as kombu_redis

TRANSPORT = f"{__name__}:SentinelTransport"
"""The ``broker_transport`` value that selects this transport."""


class SentinelChannel(kombu_redis.SentinelChannel):
    """A Sentinel channel whose Redis parameters need its transport's connection."""

    def _connparams(self, asynchronous: bool = False) -> dict[str, Any]:
        if self.connection is None or self.connection.client is None:
            raise redis.exceptions.ConnectionError("the broker channel's connection is closed")
        params: dict[str, Any] = super()._connparams(asynchronous)  # type: ignore[no-untyped-call]
        return params


class SentinelTransport(kombu_redis.SentinelTransport):
    """kombu's Sentinel transport with that channel."""

    Channel = SentinelChannel
