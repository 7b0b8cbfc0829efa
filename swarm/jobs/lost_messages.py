"""Messages the Redis broker lost, or holds for a worker that died before receiving them.

Leases (swarm.store.leases) cover a message from Celery's ``task_received`` on. Two gaps
remain on kombu's Redis transport (swarm.jobs.broker_census):

* lost: the worker was killed after its BRPOP took the message and before it recorded it as
  unacked. Nothing in the broker brings it back.
* unacked, never leased: the worker died after recording it (or Redis refused its lease),
  before ``task_received`` leased it. kombu restores it after the visibility timeout (900 s).

When a job's watch (swarm.jobs.watchdog) sees no progress for a few leases, it probes: the
census of the missing nodes' queues and of ``unacked``. A node with no envelope that no
message carries is a suspect; a suspect of two probes in a row (a lease apart: a message in
the instant between BRPOP and ``unacked``, or acked by a fenced run and about to be sent
again by a sweeper, is seen by then) is lost, and the watch re-sends the job's missing nodes
as its stall backstop does (a new chord and aggregation: the lost message's chord cannot be
completed). A job with every node ended and no report waits for its aggregation message,
probed the same way: lost, the watch sends the aggregation again. An unacked message of
missing nodes (or the aggregation) delivered more than a few leases ago, whose task id has
no lease (live, or lapsed and waiting for a sweeper) and no copy in a queue,
is put back at the head of its queue and off ``unacked``, so kombu's restore does not
deliver it a second time. If a concurrent restore by kombu pushes it too, the second copy
finds the nodes' envelopes stored and calls nothing (the call guard's idempotency).

Nothing of this runs on AMQP: RabbitMQ requeues a dead consumer's messages itself.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlparse

from celery import Celery

from swarm.catalog import Catalog
from swarm.jobs.broker_census import AGGREGATION, Census, Sighting, restore, take_census
from swarm.records import JobSpec
from swarm.settings import Settings
from swarm.store import JobStore

log = logging.getLogger(__name__)
PROBE_AFTER_LEASES = 3
"""Leases without progress before a job's broker is probed (then after 2, 4, ... times that)."""
REDIS_SCHEMES = frozenset({"redis", "rediss", "sentinel"})


def probes_broker(settings: Settings) -> bool:
    """True when the broker is kombu's Redis transport (the only one with these gaps)."""
    url = settings.broker_url
    return not settings.embedded and url is not None and urlparse(url).scheme in REDIS_SCHEMES


def probe_after_s(settings: Settings) -> float:
    """No progress for this long starts the probes."""
    return PROBE_AFTER_LEASES * settings.lease_s


@dataclass(frozen=True)
class ProbeVerdict:
    """What one probe decides."""

    restore: tuple[str, ...] = ()
    """Delivery tags of unacked messages of dead receivers, to put back in their queues."""
    suspects: tuple[str, ...] = ()
    """Missing nodes no message carries (lost if the next probe agrees)."""
    lost: tuple[str, ...] = ()
    """Suspects of the previous probe that are suspects still."""


def classify(
    census: Census,
    missing: Iterable[str],
    held: frozenset[str],
    suspects: Iterable[str],
    *,
    now: float,
    stale_after_s: float,
) -> ProbeVerdict:
    """The pure decision of one probe (see the module docstring). ``missing``: the nodes with
    no envelope, none meaning the aggregation is what the job waits for (AGGREGATION);
    ``held``: task ids with a lease, live or lapsed; ``suspects``: the previous probe's."""
    wanted = frozenset(missing) or frozenset({AGGREGATION})
    tags = tuple(_restorable(census, wanted, held, now - stale_after_s))
    if not census.complete:  # absence proves nothing
        return ProbeVerdict(restore=tags)
    carried = census.nodes()
    found = tuple(n for n in sorted(wanted) if n not in carried)
    before = frozenset(suspects)
    return ProbeVerdict(tags, found, tuple(n for n in found if n in before))


def _restorable(
    census: Census, wanted: frozenset[str], held: frozenset[str], stale_before: float
) -> Iterable[str]:
    """The newest unacked copy of each task whose every copy is stale, with no lease, no
    queued copy, and nodes still missing."""
    queued = {s.task_id for s in census.queued}
    copies: dict[str, list[Sighting]] = {}
    for s in census.unacked:
        copies.setdefault(s.task_id, []).append(s)
    for task_id, group in sorted(copies.items()):
        if task_id in held or task_id in queued or not wanted.intersection(group[0].node_ids):
            continue
        if all(s.delivered_at is not None and s.delivered_at <= stale_before for s in group):
            newest = max(group, key=lambda s: s.delivered_at or 0.0)
            if newest.tag is not None:
                yield newest.tag


def probe(
    app: Celery,
    store: JobStore,
    catalog: Catalog,
    spec: JobSpec,
    missing: tuple[str, ...],
    suspects: tuple[str, ...],
    *,
    now: float,
    stale_after_s: float,
) -> ProbeVerdict:
    """Take the census of ``missing``'s queues (none missing: the aggregation's), restore
    what ``classify`` says, and return the verdict (the caller re-sends ``lost``)."""
    models = [spec.task(n).model for n in missing] or [spec.aggregate_model]
    queues = sorted({catalog.model(model).queue for model in models})
    with app.connection_for_write() as conn:
        if conn.transport.driver_type != "redis":
            return ProbeVerdict()
        channel = conn.default_channel
        census = take_census(channel, spec.job_id, queues)
        unacked_ids = {s.task_id for s in census.unacked}
        held = frozenset(store.held_tasks(spec.job_id, sorted(unacked_ids)))
        verdict = classify(census, missing, held, suspects, now=now, stale_after_s=stale_after_s)
        for tag in verdict.restore:
            restore(channel, tag)
    log.debug(
        "swarm probe: job %s: %d missing, %d queued and %d unacked messages%s; restored %d, "
        "suspects %s, lost %s",
        spec.job_id, len(missing), len(census.queued), len(census.unacked),
        "" if census.complete else " (incomplete)", len(verdict.restore),
        list(verdict.suspects), list(verdict.lost),
    )  # fmt: skip
    return verdict
