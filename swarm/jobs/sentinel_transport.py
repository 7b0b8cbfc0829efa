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
timeout (as a killed worker's). ``install()`` makes the ``sentinel://`` scheme name it
(swarm.jobs.queueing calls it for a Sentinel broker): kombu switches between the URL's
sentinels by their scheme, so a ``broker_transport`` setting would be lost at the first
switch.
"""

from __future__ import annotations

from typing import Any

import redis
from kombu import transport as kombu_transport
from kombu.transport import redis as kombu_redis

TRANSPORT = f"{__name__}:SentinelTransport"
"""This transport, as kombu names transports."""
SCHEME = "sentinel"


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


def install() -> None:
    """Make the ``sentinel://`` scheme name this transport in this process."""
    if kombu_transport.TRANSPORT_ALIASES.get(SCHEME) != TRANSPORT:
        kombu_transport.TRANSPORT_ALIASES[SCHEME] = TRANSPORT
        kombu_transport._transport_cache.pop(SCHEME, None)
