"""A chord member's counted part survives a failover of the Redis result backend.

A header task that ends calls the backend's ``on_chord_part_return`` after its body (the
Lua script that counts it and, for the last one, claims the aggregation's dispatch).
Celery's ``result_backend_always_retry`` retries ``store_result`` and ``get`` through a
Redis outage, not this call: a header task ending while the primary fails over behind
Sentinel raises ``ConnectionError`` (or ``MasterNotFoundError``) outside its body. The
threads pool then drops the exception: the message is never acknowledged, it holds a slot
of the worker's prefetch for good, and on RabbitMQ, where the prefetch follows the node
count (workers/prefetch.py), two such messages per worker stopped both workers taking
anything, the job's watch included (a 1,000-node failover test hung 1 run in 3).

``outage_safe`` makes a Redis backend class whose ``on_chord_part_return`` goes through
the backend's own retry loop (``Backend._ensure_retryable``: the errors its
``exception_safe_to_retry`` accepts, ``result_backend_max_retries`` tries with its backoff,
a WARNING per try). Counting again is safe: the script counts a task id and header index
once. If a try ran the script but lost its reply after claiming the dispatch, the next try
finds the claim taken and does not send the aggregation; the claim expires and the job's
watchdog (swarm.jobs.watchdog) sends it when the job stops moving.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from celery.backends.redis import RedisBackend

log = logging.getLogger(__name__)


class OutageSafeChords:
    """Mixin for a Redis backend class: the chord part's count retried like a result."""

    def on_chord_part_return(self, request: Any, state: Any, result: Any, **kwargs: Any) -> Any:
        """Celery's count of this header task, tried again while Redis cannot answer."""
        count = super().on_chord_part_return  # type: ignore[misc]  # a RedisBackend's
        return self._ensure_retryable(count, request, state, result, **kwargs)  # type: ignore[attr-defined]


@functools.cache
def outage_safe(backend: type[Any]) -> type[Any]:
    """``backend`` with OutageSafeChords when it is a Redis backend (Sentinel included);
    any other backend class unchanged."""
    if not issubclass(backend, RedisBackend) or issubclass(backend, OutageSafeChords):
        return backend
    log.debug("swarm: chord parts on %s retried through outages", backend.__name__)
    return type(f"OutageSafe{backend.__name__}", (OutageSafeChords, backend), {})
