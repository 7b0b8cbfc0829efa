"""Writes that must survive a Redis failover.

Redis replicates asynchronously: a write the primary acknowledged is lost if the primary
dies before a replica has it and that replica is promoted. For the writes whose loss would
bill or run a call twice, the job store sends ``WAIT 1 <wait_ms>`` in the same pipeline
(WAIT counts the writes of its own connection, so it must follow them on that connection):
the write is answered only once one replica has it, or after ``wait_ms`` (bounded: the
write then stands on the primary alone). A WAIT that timed out means no replica is
keeping up (after a failover the promoted primary has none until the old one rejoins):
the next writes send no WAIT for REPLICA_RECHECK_S, then try again, so a missing replica
costs one ``wait_ms`` per few seconds instead of every write. ``wait_ms`` 0 sends no WAIT
(a single Redis).

The same writes, being idempotent, are tried again while the store is unreachable (a
failover under way) for ``outage_s`` before the error is the caller's.

``first_then`` runs a call once and builds its tenacity loop only when that try failed:
a ``Retrying`` makes a ``threading.local`` whose cost grows with the process's threads (a
worker has a hundred or more), paid on every call that never retries.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import redis
from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_exponential

from swarm.store import wire
from swarm.store.group_commit import GroupCommit
from swarm.store.outages import STORE_OUTAGES

log = logging.getLogger(__name__)
T = TypeVar("T")
REPLICAS = 1
"""Replicas a durable write waits for (one: a Sentinel failover promotes one of them)."""
REPLICA_RECHECK_S = 5.0
"""After a WAIT that no replica answered, the writes of this long send none."""
RETRY_MAX_S = 1.0
"""Longest pause between two tries of a write while the store is unreachable."""


@dataclass
class Durable:
    """Pipelines ending with a bounded WAIT, and tries again through outages."""

    client: redis.Redis
    wait_ms: int = 0
    outage_s: float = 0.0
    _quiet_until: float = field(default=0.0, init=False)
    """No WAIT before this (time.monotonic): the last one found no replica."""

    def waits(self) -> bool:
        """True when the next write sends a WAIT (``wait_ms``, and a replica answered lately)."""
        return bool(self.wait_ms) and time.monotonic() >= self._quiet_until

    def __post_init__(self) -> None:
        self._group = GroupCommit(self._send)

    def write(self, build: Callable[[Any], object], *, raise_on_error: bool = True) -> list[Any]:
        """Run the commands ``build`` adds to a pipeline, then WAIT (when ``waits``); the
        commands' results (not WAIT's). ``raise_on_error`` False: a command's error is its
        result (an exception instance), for the caller to judge. Writes of threads that
        write at the same time go in one round trip (swarm.store.group_commit)."""
        results = self._group.write(build)
        if raise_on_error:
            for result in results:
                _raised(result)
        return results

    def _send(self, build: Callable[[Any], object]) -> list[Any]:
        pipe = self.client.pipeline(transaction=False)
        build(pipe)
        waits = self.waits()
        if waits:
            pipe.wait(REPLICAS, self.wait_ms)
        results = wire.execute(pipe, raise_on_error=False)
        if waits and int(_raised(results.pop())) < REPLICAS:
            self._quiet_until = time.monotonic() + REPLICA_RECHECK_S
            log.debug("swarm store: no replica acknowledged a write in %d ms; no WAIT for "
                      "%.0f s", self.wait_ms, REPLICA_RECHECK_S)  # fmt: skip
        return results

    def retrying(self, write: Callable[[], T]) -> T:
        """``write()``, tried again on a store outage for up to ``outage_s`` (from the first
        try)."""
        if self.outage_s <= 0:
            return write()
        started = time.monotonic()

        def loop() -> Retrying:
            return Retrying(
                retry=retry_if_exception_type(STORE_OUTAGES),
                stop=stop_after_delay(max(self.outage_s - (time.monotonic() - started), 0.0)),
                wait=wait_exponential(multiplier=0.05, max=RETRY_MAX_S),
                before_sleep=_log_retry,
                reraise=True,
            )

        return first_then(write, loop)


def first_then(call: Callable[[], T], loop: Callable[[], Retrying]) -> T:
    """``call()`` under the tenacity loop ``loop()`` builds, that loop built only when the
    first try raised: it then starts from that try's error (replayed, not run again), so
    it decides, waits and stops exactly as if it had run the first try itself."""
    try:
        return call()
    except BaseException as exc:  # handed to the loop, which re-raises what it gives up on
        first: list[BaseException] = [exc]

    def replay() -> T:
        if first:
            raise first.pop()
        return call()

    return loop()(replay)


def _raised(reply: Any) -> Any:
    """``reply``, or raised when it is an error (a pipeline run with raise_on_error=False)."""
    if isinstance(reply, Exception):
        raise reply
    return reply


def _log_retry(state: Any) -> None:
    log.debug(
        "swarm store: a durable write failed (%s); trying again (attempt %d)",
        state.outcome.exception() if state.outcome else None,
        state.attempt_number,
    )
