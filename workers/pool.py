"""The threads pool, with a task that raised outside its body handed back to Celery.

Celery's tracer catches what a task's body raises; what it raises after the body (storing
the result, counting a chord part, a signal handler) escapes it. The prefork pool reports
that as a lost worker; Celery's threads pool keeps it in the thread's future, which nobody
reads: the request is never acknowledged nor rejected, so its message stays unacked for
the life of the worker, holding a slot of the prefetch (on RabbitMQ, where the prefetch
follows the node count, a few such messages stop the worker taking anything).

``TaskPool`` calls the request's error callback with a ``WorkerLostError`` instead, as the
prefork pool does: with ``task_acks_late`` and ``task_reject_on_worker_lost`` the message
is rejected back to its queue and runs again (the call guard's idempotency makes a second
run reuse what the first stored); a message acknowledged before the raise is left as it
is. ``use_for`` puts it in place of Celery's threads pool when a worker starts
(``worker_init``, before the pool is made).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future
from functools import partial
from typing import Any

from billiard.einfo import ExceptionInfo
from billiard.exceptions import WorkerLostError
from celery import concurrency
from celery.concurrency import thread

log = logging.getLogger(__name__)


class TaskPool(thread.TaskPool):  # type: ignore[misc]  # celery is untyped
    """Celery's threads pool whose tasks that raised outside their body are handed back."""

    def on_apply(self, *args: Any, error_callback: Callable[..., Any] | None = None,
                 **kwargs: Any) -> Any:  # fmt: skip
        """Celery's ``on_apply``, then ``error_callback`` if the run raises."""
        result = super().on_apply(*args, **kwargs)
        if error_callback is not None:
            result.f.add_done_callback(partial(hand_back, error_callback))
        return result


def hand_back(error_callback: Callable[..., Any], future: Future[Any]) -> None:
    """Call ``error_callback`` with a WorkerLostError when ``future`` raised (its message
    goes back to the queue), nothing when it returned or was cancelled at shutdown."""
    if future.cancelled():
        return
    exc = future.exception()
    if exc is None:
        return
    if _settled(error_callback):
        log.warning("swarm: a task raised after its message was acknowledged (%r); nothing "
                    "goes back to the queue", exc)  # fmt: skip
        return
    log.warning("swarm: a task raised outside its body (%r); its message goes back to the queue",
                exc)  # fmt: skip
    try:
        raise WorkerLostError(f"the task raised outside its body: {exc!r}") from exc
    except WorkerLostError:
        error_callback(ExceptionInfo())


def _settled(error_callback: Callable[..., Any]) -> bool:
    """True when the callback's request (a bound ``Request.on_failure``) has its message
    acknowledged or rejected already. Celery's ack after a broker reconnection also restores
    the prefetch count, which raises on a dead connection after the ack went out; rejecting
    that message raises MessageStateError in the consumer's loop, which stops the worker."""
    request = getattr(error_callback, "__self__", None)
    message = getattr(request, "message", None)
    return getattr(request, "acknowledged", False) is True or (
        getattr(message, "acknowledged", False) is True
    )


def use_for(sender: Any = None, **_: Any) -> None:
    """``worker_init``: this pool instead of Celery's threads pool (``-P threads``)."""
    pool_cls = getattr(sender, "pool_cls", None)
    if pool_cls is not None and concurrency.get_implementation(pool_cls) is thread.TaskPool:
        sender.pool_cls = TaskPool
        log.debug("swarm: threads pool with tasks that raise outside their body handed back")
