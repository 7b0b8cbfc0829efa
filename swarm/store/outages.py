"""Which exceptions mean Redis cannot be reached, for code that must tell an outage of the
store from a failure of its own work."""

from __future__ import annotations

import redis

STORE_OUTAGES: tuple[type[Exception], ...] = (
    redis.exceptions.ConnectionError,  # refused, reset, closed; BusyLoadingError after a restart
    redis.exceptions.TimeoutError,
    # A primary demoted by a failover answers writes READONLY until clients find the new
    # one (a Sentinel client reconnects on it; a plain URL waits for the operator).
    redis.exceptions.ReadOnlyError,
)
"""Redis (job store, admission, result backend, broker) unreachable. Not a node's failure:
a Sentinel failover is one until the promoted replica answers (MasterNotFoundError is a
ConnectionError). The gateway call loop lets them through (a billed answer that could not
be recorded must not become an error envelope) and the task adapters run the task again
later; a billed call's ledger line is first tried again for SWARM_STORE_OUTAGE_S."""
