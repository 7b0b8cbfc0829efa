"""Take-over: a task whose worker stopped renewing its lease is sent again within seconds.

Every task that runs nodes holds a lease on its message (swarm.store.leases) and keeps, next
to it, the signature that sends the same message again: same task id, arguments, queue,
priority, chord and group (Celery's own ``signature_from_request``, as ``Task.retry`` uses).
Every worker process sweeps the lapse index every ``sweep_every_s``; the sweeper that takes
a lapse (one winner per lapse) sends the message again at once.

A take holds the lapse rather than removing it: the sweeper's own lease on the message for
one lease time, the member due again at its end. Only once the message is sent does the
sweeper settle it (drop the hold and the member, unless a run that received the message
leased it meanwhile). A sweeper killed between its take and its send leaves a lapse that
falls due again a lease later, and another sweeper sends the message; a sweeper killed
between the send and the settle leaves one that is sent twice, which the run finds done.

The re-sent message finds what the first run left: stored envelopes are returned, stored
answers reused, a call slot still claimed by a run that is only slow is waited for (its
lease is renewed, so it has not lapsed). The chord counts a task id once, so the re-sent
message and the broker's own redelivery of the original (Redis after the visibility
timeout, AMQP when the dead worker's connection closes) complete the same member; the
later of them calls nothing.

The same index holds deferred tasks (workers.deferral): a task's next run, listed as due
at the end of its countdown with no lease set, is sent by the sweep that finds it due.

A message of a ``kept`` task (the job's watch, on kombu's Redis transport) is sent and not
settled: the hold lapses after ``hold_s`` unless a run that received the message took it over
(receive.lua), and a sweeper then sends it again. That transport loses a message a worker took
off its queue (BRPOP) and could not record as unacked: the worker killed in between, or the
Redis primary failing over (the BRPOP replicated, the record not). The watch's probes find a
node's or the aggregation's message lost so (swarm.jobs.lost_messages), but nothing would find
the watch's own: the job would be left without the check that re-sends what a failover lost.
A watch that waits in its queue longer than a hold is sent again, and the copy runs one check
more (the next check stays one index member: every run defers it under the same task id).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from celery import Celery
from celery.canvas import Signature
from kombu.utils import json

from swarm import tracing
from swarm.store import JobStore
from swarm.store.leases import parse_member
from swarm.unique import unique_hex

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


def sweep(
    store: JobStore,
    app: Celery,
    hold_s: float,
    before_send: Callable[[Signature], None] | None = None,
    kept: frozenset[str] = frozenset(),
) -> int:
    """Send every lapsed (or deferred and due) task this sweeper wins, SWEEP_LIMIT at a time
    while whole batches are sent, each held for ``hold_s`` until sent; how many it sent.
    ``before_send`` sees each message between its take and its send (a test's hook);
    the messages of tasks named in ``kept`` stay held once sent (module docstring)."""
    sent = 0
    while True:
        token = unique_hex()  # this pass's holds
        batch = sum(
            _send_lapsed(store, app, member, token, hold_s, before_send, kept)
            for member in store.lapsed_tasks(SWEEP_LIMIT)
        )
        sent += batch
        if batch < SWEEP_LIMIT:
            return sent


def _send_lapsed(
    store: JobStore,
    app: Celery,
    member: str,
    token: str,
    hold_s: float,
    before_send: Callable[[Signature], None] | None,
    kept: frozenset[str],
) -> int:
    """Take one lapse and send its message again: 1 when this sweeper sent it (a ``kept``
    task's hold left to lapse, the others settled)."""
    raw = store.take_lapse(member, token, hold_s)
    if raw is None:
        return 0
    signature = Signature.from_dict(json.loads(raw), app=app)  # type: ignore[no-untyped-call]
    log.debug("swarm takeover: lease %s lapsed; sending its message again", member)
    if before_send is not None:
        before_send(signature)
    try:
        with tracing.resending(store, parse_member(member)[0], "takeover"):
            signature.apply_async()  # in the job's trace (a span under its root)
    except Exception as exc:  # the broker refused it: a sweep after the hold tries again
        log.debug("swarm takeover: could not send %s again (%s)", member, exc)
        return 0
    if signature.task in kept:
        log.debug("swarm takeover: sent %s again, held until a run leases it", member)
    else:
        store.settle_lapse(member, token)
    return 1
