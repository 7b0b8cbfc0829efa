"""Countdowns that outlive their worker: a task's next run waits in Redis, not in a worker.

Celery's ``Task.retry(countdown=...)`` sends the next run's message at once with an ETA; on
kombu's Redis transport the worker that receives it holds it, unacknowledged, until then. A
worker killed meanwhile takes it along until the broker's visibility timeout (900 s), and
the lease that covers a leased message from its receipt (workers.leases) leaves a gap:
the retrying run releases its lease when it ends, the copy is leased when it is received,
and a worker killed between the two (the copy already in its ``unacked``) holds a message
no lease covers. The job's watch chain was held the same way, so nothing probed for it.

So a leased task's countdown (an admission requeue, a batch poll's next step, the
watchdog's next check) is deferred instead: the retrying run stores the next run's
signature and lists the task's lease member in the lapse index, due at the end of the
countdown, in the write that releases its own lease (``JobStore.defer_task``). Any worker's
sweeper sends it when due (swarm.jobs.takeover), and the sweeper of the process that
deferred it wakes for it (``Sweeper.wake_in``). Whenever a worker is killed, the next run
is either in Redis or covered by a lease. A cancel sets the job's flag, then makes its
deferred runs due at once (``JobStore.hasten_deferred``); a run deferred meanwhile reads
the flag after its own write, and is due at once too if it is set (a deferral the hasten
did not see read the flag after the cancel set it).

Without leases (the embedded mode, whose broker lives and dies with its process) the
countdown goes to the broker as Celery sends it; so does ``again_later``'s, sent while
Redis is unreachable, and a deferral that finds Redis unreachable (the run's lease,
released or not, lapses: a sweeper may send the task again too, which finds its work
done).
"""

from __future__ import annotations

import logging
from typing import Any

from celery import Task
from celery.canvas import Signature
from celery.exceptions import Retry

from swarm.jobs.takeover import resend_signature
from swarm.store.leases import Lease, task_lease
from swarm.store.outages import STORE_OUTAGES
from workers import leases, process

log = logging.getLogger(__name__)


def retry_later(
    task: Task,
    job_id: str,
    countdown_s: float,
    args: tuple[Any, ...] | None = None,
    *,
    hasten: bool = True,
) -> Exception:
    """What to raise for ``task``'s next run in ``countdown_s`` (with ``args``, else the
    same): the run deferred in Redis (module docstring) and Celery's Retry, which records
    the retry and acknowledges this delivery; or, without leases, ``task.retry``'s own.
    ``hasten`` False: a cancelled job does not make this run due at once (``defer``)."""
    rt = process.get()
    request = task.request
    if rt.leases is None or request.id is None or request.called_directly:
        retry: Exception = task.retry(args=args, countdown=countdown_s, throw=False)
        return retry
    # swarm's tasks take their arguments by position: new ones replace the old kwargs too
    kwargs: dict[str, Any] | None = {} if args is not None else None
    signature: Signature = task.signature_from_request(
        request, args, kwargs, retries=request.retries + 1
    )
    held = leases.run_lease(task)
    lease = held if held is not None else task_lease(job_id, str(request.id))
    try:
        defer(lease, countdown_s, signature, hasten=hasten)
    except STORE_OUTAGES as exc:  # Redis went away since the run: the broker holds it
        log.warning("swarm: Redis unreachable (%s); %s waits in the broker", exc, request.id)
        fallback: Exception = task.retry(args=args, countdown=countdown_s, throw=False)
        return fallback
    retry = Retry(when=countdown_s, sig=signature)
    return retry


def send_later(job_id: str, task_id: str, signature: Signature, delay_s: float) -> None:
    """Defer a new message (task id ``task_id``, not leased by anyone) by ``delay_s``."""
    defer(task_lease(job_id, task_id, ""), delay_s, signature)


def defer(lease: Lease, delay_s: float, signature: Signature, *, hasten: bool = True) -> None:
    """Store ``signature`` as due in ``delay_s`` under ``lease``'s member, releasing
    ``lease`` (no longer renewed from here on), and wake this process's sweeper then.
    ``hasten``: in a cancelled job the run is due at once, so a node's next run ends it
    cancelled without waiting out its countdown. The job's watch passes False: a watch due
    at once in a cancelled job whose nodes cannot end (their queue has no worker) ran its
    check again and again, tens of times a second, until the job ended."""
    rt = process.get()
    assert rt.leases is not None
    rt.leases.drop(lease)  # before the write: a renewal after it would move the due time
    sent = resend_signature(signature)
    rt.store.defer_task(lease, max(delay_s, 0.0), sent)
    if hasten and delay_s > 0 and rt.store.cancelled(lease.job_id):  # after the write: below
        rt.store.defer_task(lease, 0.0, sent)
        delay_s = 0.0
    log.debug("swarm: %s deferred by %.1f s", lease.member, delay_s)
    leases.wake_sweeper_in(delay_s)
