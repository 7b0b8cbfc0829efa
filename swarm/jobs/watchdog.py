"""The job watchdog: re-sends what a killed worker took with it and the broker lost.

kombu's Redis transport takes a message off its queue (BRPOP) and only then records it as
unacked. A worker killed between the two (SIGKILL, OOM killer) loses that message for
good: the visibility timeout cannot bring back what was never recorded, and the job's
chord, one member short, never fires (a kill just as the worker fetches its next
messages does it). Redis itself can
lose the last writes before a crash (AOF ``everysec``). Nothing in Celery notices.

So every fan-out also sends one watch task (``swarm.watch``, on the aggregation's queue)
that comes back every ``check_every_s`` with the job's progress fingerprint. On the Redis
broker, a fingerprint that has not moved for a few leases makes it probe the broker
(swarm.jobs.lost_messages, then again after twice as long, and so on): a message the
broker lost, two probes in a row, makes the missing nodes be sent again at once, and an
unacked message of a worker that died before receiving it goes back to its queue. When
the fingerprint has not moved for ``stall_s`` (two visibility timeouts plus two restore
sweeps: long enough for a killed worker's unacked tasks to come back AND finish), the
job stalled, whatever the probes found: the nodes with no envelope are sent again (a chord
over them and a new aggregation, as by a resume; at most ``MAX_RESENDS`` times), or, when
every node has its envelope but there is no report, or the resends ran out, the
aggregation alone, which writes the report (nodes that never ran are errors: ``swarm
resume`` runs them later).

Re-sending cannot double anything (the call guard's idempotency): a node whose envelope is
stored returns it, a call's stored answer is reused instead of calling again, the chord
counts a task id once and the report is written once. A node only queued behind other
jobs that gets re-sent costs one extra short task. The chain stops with the report.
"""

from __future__ import annotations

import itertools
import logging
import time
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

import kombu.exceptions
import redis
from celery import Celery

from swarm.catalog import Catalog
from swarm.errors import JobNotFoundError
from swarm.jobs.lost_messages import ProbeVerdict, probe, probe_after_s, probes_broker
from swarm.jobs.queueing import WATCH_TASK
from swarm.jobs.takeover import resend_signature
from swarm.jobs.taskrepr import NO_KWARGS
from swarm.records import JobSpec
from swarm.settings import Settings
from swarm.store import JobStore, Progress
from swarm.store.batches import batch_store
from swarm.store.leases import task_lease

log = logging.getLogger(__name__)
MAX_RESENDS = 2
"""Times a stalled job's missing nodes are sent again before the aggregation is forced."""
STALL_SLACK_S = 2.0
"""Margin for clocks of different hosts (a watch's ``since`` is another host's time)."""


def stall_s(settings: Settings) -> float:
    """No progress for this long means a message was lost: a killed worker's unacked task
    is back after the visibility timeout plus a sweep, and ends within another timeout."""
    sweeps = 2 * settings.unacked_restore_interval_s
    return 2 * settings.visibility_timeout_s + sweeps + STALL_SLACK_S


def check_every_s(settings: Settings) -> float:
    """Countdown between two checks: well inside the visibility timeout (a countdown held
    longer would be redelivered while waiting, and the chain would fork); a lease where the
    watch probes the broker (a probe is due a few leases after the last progress)."""
    every_s = min(stall_s(settings) / 4, settings.visibility_timeout_s / 2)
    if probes_broker(settings):
        every_s = min(every_s, settings.lease_s)
    return max(1.0, every_s)


class Action(StrEnum):
    """What one check decides."""

    DONE = "done"
    """The report exists (or the job expired): the chain ends."""
    WAIT = "wait"
    """Progress moved, or not for long enough: check again later."""
    RESEND_NODES = "resend_nodes"
    """Stalled with nodes that never ended: send them again, then aggregate."""
    AGGREGATE = "aggregate"
    """Stalled with no node left to send (or resends exhausted): send the aggregation."""
    PROBE = "probe"
    """No progress for a few leases: look for the missing nodes' messages in the broker (or,
    every node ended, the aggregation's)."""


@dataclass(frozen=True)
class Seen:
    """The last progress a watch saw, carried from one check to the next."""

    fingerprint: str
    """The job's progress as ``fingerprint`` renders it."""
    since: float
    """Unix time the fingerprint was first seen."""
    resends: int = 0
    """Times this chain sent nodes or the aggregation again."""
    probes: int = 0
    """Broker probes since the fingerprint last moved."""
    suspects: tuple[str, ...] = ()
    """Missing nodes the last probe found in no message (swarm.jobs.lost_messages)."""

    @classmethod
    def load(cls, raw: dict[str, Any] | None) -> Seen | None:
        """The Seen a watch message carries (JSON turned its tuple into a list)."""
        if raw is None:
            return None
        return cls(**{**raw, "suspects": tuple(raw.get("suspects", ()))})


@dataclass(frozen=True)
class Check:
    """One check's verdict, what to send, and what to carry to the next check."""

    action: Action
    seen: Seen
    missing: tuple[str, ...] = ()
    """Nodes with no envelope (for RESEND_NODES and PROBE)."""
    reason: str = ""
    """Why nodes or the aggregation are sent again (for the log)."""


def fingerprint(progress: Progress, batch_polls: int = 0) -> str:
    """What moves while a job makes progress: its nodes done, failed, cancelled and running, and the
    polls of its batch files (swarm.batch: a job waiting on a batch is not stalled)."""
    polls = f"/b{batch_polls}" if batch_polls else ""
    return f"{progress.done}/{progress.failed}/{progress.cancelled}/{progress.in_flight}{polls}"


def decide(
    seen: Seen | None,
    current: str,
    missing: tuple[str, ...],
    *,
    now: float,
    stall_after_s: float,
    probe_after_s: float | None = None,
) -> Check:
    """The pure decision of one check of a job that has no report yet (``probe_after_s``:
    None where the broker is not probed)."""
    if seen is None or seen.fingerprint != current:
        resends = seen.resends if seen is not None else 0
        return Check(Action.WAIT, Seen(current, now, resends))
    if now - seen.since >= stall_after_s:
        again = Seen(current, now, seen.resends + 1)
        reason = f"made no progress for {stall_after_s:.0f} s"
        if missing and seen.resends < MAX_RESENDS:
            return Check(Action.RESEND_NODES, again, missing, reason)
        return Check(Action.AGGREGATE, again, reason=reason)
    if probe_due(seen, now, probe_after_s):  # nothing missing: the aggregation is probed
        return Check(Action.PROBE, replace(seen, probes=seen.probes + 1), missing)
    return Check(Action.WAIT, seen)


def probe_due(seen: Seen, now: float, probe_after_s: float | None) -> bool:
    """A probe is due after ``probe_after_s`` without progress, then after twice, four
    times ... as long (a job queued behind others is not probed every check), and at once
    while the last probe has suspects to confirm."""
    if probe_after_s is None:
        return False
    return bool(seen.suspects) or now - seen.since >= probe_after_s * 2**seen.probes


def needs_missing(
    seen: Seen | None,
    current: str,
    *,
    now: float,
    stall_after_s: float,
    probe_after_s: float | None,
) -> bool:
    """True when ``decide`` may act, so the check must read which nodes have no envelope."""
    if seen is None or seen.fingerprint != current:
        return False
    return now - seen.since >= stall_after_s or probe_due(seen, now, probe_after_s)


def after_probe(check: Check, verdict: ProbeVerdict) -> Check:
    """What a probe's verdict makes of a PROBE check: the missing nodes (none: the
    aggregation) sent again when a message was lost (while resends last), else a wait
    carrying the suspects."""
    seen = replace(check.seen, suspects=verdict.suspects)
    if verdict.lost and seen.resends < MAX_RESENDS:
        again = Seen(seen.fingerprint, seen.since, seen.resends + 1, seen.probes)
        reason = f"lost the message(s) of {', '.join(verdict.lost)} in the broker"
        action = Action.RESEND_NODES if check.missing else Action.AGGREGATE
        return Check(action, again, check.missing, reason)
    return Check(Action.WAIT, seen)


def probe_job(
    app: Celery, store: JobStore, catalog: Catalog, settings: Settings, job_id: str, check: Check
) -> Check:
    """Run a PROBE check's probe of the broker (swarm.jobs.lost_messages); a broker or
    store that cannot answer makes it a wait (the next probe, or the stall, comes later),
    a job expired meanwhile ends the watch."""
    try:
        verdict = probe(
            app, store, catalog, store.spec(job_id), check.missing, check.seen.suspects,
            now=time.time(), stale_after_s=probe_after_s(settings),
        )  # fmt: skip
    except (redis.RedisError, kombu.exceptions.OperationalError) as exc:
        log.debug("swarm watchdog: job %s: the probe failed (%s)", job_id, exc)
        return Check(Action.WAIT, check.seen)
    except JobNotFoundError:
        return Check(Action.DONE, check.seen)
    return after_probe(check, verdict)


def check_job(store: JobStore, settings: Settings, job_id: str, seen: Seen | None) -> Check:
    """Look at a job once (see the module docstring): its progress only, and which nodes
    have no envelope when a probe or the stall is due."""
    try:
        progress = store.progress(job_id)
        if progress.finished:
            return Check(Action.DONE, seen or Seen("", time.time()))
        now = time.time()
        current = fingerprint(progress, batch_store(store).beats(job_id))
        stall = stall_s(settings)
        probe = probe_after_s(settings) if probes_broker(settings) else None  # None: no probes
        missing: tuple[str, ...] = ()
        if needs_missing(seen, current, now=now, stall_after_s=stall, probe_after_s=probe):
            missing = missing_nodes(store, store.spec(job_id), settings.report_page_nodes)
    except JobNotFoundError:  # expired: nothing left to watch
        return Check(Action.DONE, seen or Seen("", time.time()))
    return decide(seen, current, missing, now=now, stall_after_s=stall, probe_after_s=probe)


def missing_nodes(store: JobStore, spec: JobSpec, page: int) -> tuple[str, ...]:
    """The job's nodes that have no envelope, asked of the store ``page`` nodes at a time
    (a large job's ids are never all held at once by the worker that runs the check)."""
    ids = iter(spec.node_ids)
    missing: list[str] = []
    while chunk := list(itertools.islice(ids, page)):
        missing.extend(store.not_ended(spec.job_id, chunk))
    return tuple(missing)


def send_watch(
    app: Celery,
    settings: Settings,
    spec: JobSpec,
    queue: str,
    suffix: str,
    store: JobStore,
) -> None:
    """Start the watch chain of a fan-out (on ``queue``, the aggregation's): its first check
    deferred in ``store`` (a sweeper sends it when due: workers.deferral); nothing in
    embedded mode, where the broker and the workers live and die with one process."""
    if settings.embedded:
        return
    task_id = f"{spec.job_id}-watch{suffix}"
    signature = app.signature(
        WATCH_TASK,
        args=(spec.job_id, None),
        queue=queue,
        task_id=task_id,
        argsrepr=f"job={spec.job_id}",
        kwargsrepr=NO_KWARGS,
    )
    lease = task_lease(spec.job_id, task_id, "")
    store.defer_task(lease, check_every_s(settings), resend_signature(signature))
