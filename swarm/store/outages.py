"""Which exceptions mean Redis cannot be reached, for code that must tell an outage of the
store from a failure of its own work."""

from __future__ import annotations

import redis

STORE_OUTAGES: tuple[type[Exception], ...] = (
    redis.exceptions.ConnectionError,  # refused, reset, closed; BusyLoadingError after a restart
    redis.exceptions.TimeoutError,
)
"""Redis (job store, admission, result backend, broker) unreachable. Not a node's failure:
the gateway call loop lets them through (a billed answer that could not be recorded must
not become an error envelope) and the task adapters run the task again later."""
