"""Take-over: a task whose worker stopped renewing its lease is sent again within seconds.

Every task that runs nodes holds a lease on its message (swarm.store.leases) and keeps, next
to it, the signature that sends the same message again: same task id, arguments, queue,
priority, chord and group (Celery's own ``signature_from_request``, as ``Task.retry`` uses).
Every worker process sweeps the lapse index every ``sweep_every_s``; the sweeper that takes
a lapsed lease off the index (one winner per lapse) sends the message again at once.

The re-sent message finds what the first run left: stored envelopes are returned, stored
answers reused, a call slot still claimed by a run that is only slow is waited for (its
lease is renewed, so it has not lapsed). The chord counts a task id once, so the re-sent
message and the broker's own redelivery of the original (Redis after the visibility
timeout, AMQP when the dead worker's connection closes) complete the same member; the
later of them calls nothing.

The same index holds deferred tasks (workers.deferral): a task's next run, listed as due
at the end of its countdown with no lease set, is sent by the sweep that finds it due.
"""

from __future__ import annotations

import logging
import threading

from celery import Celery
from celery.canvas import Signature
from kombu.utils import json

from swarm import tracing
from swarm.store import JobStore
from swarm.store.leases import parse_member

log = logging.getLogger(__name__)
SWEEPS_PER_LEASE = 5
"""Sweeps per lease lifetime: a lapse is noticed at most a fifth of a lease late."""
SWEEP_LIMIT = 100
"""Most lapses one sweep takes."""


def sweep_every_s(lease_s: float) -> float:
    """Seconds between two sweeps of one worker process."""
    return lease_s / SWEEPS_PER_LEASE


def resend_signature(signature: Signature) -> str:
    """JSON of a message's signature (Celery's ``Task.signature_from_request``): what sends
    the message again."""
    return str(json.dumps(dict(signature)))  # type: ignore[no-untyped-call]


def sweep(store: JobStore, app: Celery, limit: int = SWEEP_LIMIT) -> int:
    """Send every lapsed (or deferred and due) task this sweeper wins, ``limit`` at a time
    while whole batches are sent; how many it sent."""
    sent = 0
    while (batch := _sweep_once(store, app, limit)) == limit:
        sent += batch
    return sent + batch


SENDING = threading.Lock()
"""Held from a lapse's take to its message's send. A process that dies in between loses
that message until the job's watch finds the node stalled; the tests' kill-on-receipt
hook (workers.leases) waits for it, so that it kills in the window it means to test."""


def _sweep_once(store: JobStore, app: Celery, limit: int) -> int:
    sent = 0
    for member in store.lapsed_tasks(limit):
        with SENDING:
            sent += _send_lapsed(store, app, member)
    return sent


def _send_lapsed(store: JobStore, app: Celery, member: str) -> int:
    """Take one lapse and send its message again: 1 when this sweeper sent it."""
    raw = store.take_lapse(member)
    if raw is None:
        return 0
    signature = Signature.from_dict(json.loads(raw), app=app)  # type: ignore[no-untyped-call]
    log.debug("swarm takeover: lease %s lapsed; sending its message again", member)
    try:
        with tracing.resending(store, parse_member(member)[0], "takeover"):
            signature.apply_async()  # in the job's trace (a span under its root)
    except Exception as exc:  # the broker refused it: the next sweep tries again
        log.debug("swarm takeover: could not send %s again (%s)", member, exc)
        store.relist_lapse(member)
        return 0
    return 1
