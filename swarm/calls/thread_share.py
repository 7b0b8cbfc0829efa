"""Whether a call waiting for admission gives its worker thread to another job's node.

A worker runs the nodes of its messages on a fixed number of node threads, and a node that
waits for admission (a full model, its tenant over its share) sleeps in its thread. A large
job's nodes can fill every thread of a worker that way, all waiting for the same few
permits, while a small job's nodes, received by the same worker, wait for a thread: they do
not even reach admission, where their tenant would be preferred.

So a waiting call asks ``gives_way()`` before it sleeps again: the worker's node pool
(workers.node_pool) answers True when a node of another job waits for a thread and this
call's job holds more than its share of the threads; the call then goes back to the queue
for ``COUNTDOWN_S`` (the gate raises RetryLater) and its thread runs the waiting node. Where
no pool is installed (a call outside a worker's node threads), nothing gives way.
"""

from __future__ import annotations

from collections.abc import Callable

COUNTDOWN_S = 1.0
"""Countdown of a call sent back to the queue to give its thread away: it asks again soon
(its job's share of the threads may be free by then), behind the waiting job's messages."""


def _never() -> bool:
    return False


_check: Callable[[], bool] = _never


def install(check: Callable[[], bool] | None) -> None:
    """Answer ``gives_way`` with ``check`` (called in the waiting call's thread; None: never)."""
    global _check
    _check = check or _never


def gives_way() -> bool:
    """True when the calling thread's call should give its thread to another job's node
    (each True is one thread promised: the caller must then leave the thread)."""
    return _check()
