"""A command of another module sent to Redis in the same round trip as a store write.

The job store and admission are separate concepts that share one Redis. Where a call
needs both at the same moment (its claim and its first admission permit), the store's
pipeline carries the other module's command too: one round trip instead of two. A
``Companion`` is that command: a Redis store queues it on its pipeline and hands it its
reply; a store without pipelines (the in-memory twin) or a companion without a Redis of
its own runs it alone.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any


class Companion(ABC):
    """One command that rides along with a store write."""

    def queue(self, pipe: Any) -> bool:
        """Add the command to ``pipe`` (a redis-py pipeline on the store's Redis); False
        when it cannot go in one (then the store calls ``run``)."""
        return False

    def take(self, reply: Any) -> None:
        """The command's reply from the pipeline (an exception instance when it failed)."""
        raise NotImplementedError  # only called after ``queue`` said True

    @abstractmethod
    def run(self) -> None:
        """Run the command alone (its own round trip, or in process)."""


SERVER_FIELDS = ("host", "port", "db", "path", "username")
"""The connection settings that name one Redis server and database."""


def same_redis(pipe: Any, client: Any) -> bool:
    """True when the pipeline ``pipe`` and the redis-py ``client`` talk to one server and
    database (the same pool class, Sentinel service and address): a companion may ride in
    that pipeline only then."""
    a, b = pipe.connection_pool, client.connection_pool
    if type(a) is not type(b) or getattr(a, "service_name", None) != getattr(
        b, "service_name", None
    ):
        return False
    ka, kb = a.connection_kwargs, b.connection_kwargs
    return all(ka.get(name) == kb.get(name) for name in SERVER_FIELDS)
