"""The job watchdog: re-sends what a killed worker took with it and the broker lost.

kombu's Redis transport takes a message off its queue (BRPOP) and only then records it as
unacked. A worker killed between the two (SIGKILL, OOM killer) loses that message for
good: the visibility timeout cannot bring back what was never recorded, and the job's
chord, one member short, never fires. A SIGKILL test lost a node this way in one
run of two (the kill came just as the worker fetched its next messages). Redis itself can
lose the last writes before a crash (AOF ``everysec``). Nothing in Celery notices.

So every fan-out also sends one watch task (``swarm.watch``, on the aggregation's queue)
that comes back every ``check_every_s`` with the job's progress fingerprint. When the
fingerprint has not moved for ``stall_s`` (two visibility timeouts plus two restore
sweeps: long enough for a killed worker's unacked tasks to come back AND finish), the
job stalled: the nodes with no envelope are sent again (a chord over them and a new
aggregation, as by a resume; at most ``MAX_RESENDS`` times), or, when every node has its
envelope but there is no report, or the resends ran out, the aggregation alone, which
writes the report (nodes that never ran are errors: ``swarm resume`` runs them later).

Re-sending cannot double anything (the call guard's idempotency): a node whose envelope is
stored returns it, a call's stored answer is reused instead of calling again, the chord
counts a task id once and the report is written once. A node only queued behind other
jobs that gets re-sent costs one extra short task. The chain stops with the report.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from enum import StrEnum

from celery import Celery

from swarm.errors import JobNotFoundError
from swarm.jobs.queueing import WATCH_TASK
from swarm.jobs.taskrepr import NO_KWARGS
from swarm.records import JobSpec
from swarm.settings import Settings
from swarm.store import JobStore, Progress

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
    longer would be redelivered while waiting, and the chain would fork)."""
    return max(1.0, min(stall_s(settings) / 4, settings.visibility_timeout_s / 2))


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


@dataclass(frozen=True)
class Seen:
    """The last progress a watch saw, carried from one check to the next."""

    fingerprint: str
    """The job's progress as ``fingerprint`` renders it."""
    since: float
    """Unix time the fingerprint was first seen."""
    resends: int = 0
    """Times this chain sent nodes or the aggregation again."""


@dataclass(frozen=True)
class Check:
    """One check's verdict, what to send, and what to carry to the next check."""

    action: Action
    seen: Seen
    missing: tuple[str, ...] = ()
    """Nodes with no envelope (for RESEND_NODES)."""


def fingerprint(progress: Progress) -> str:
    """What moves while a job makes progress: its nodes done, failed and running."""
    return f"{progress.done}/{progress.failed}/{progress.in_flight}"


def decide(
    seen: Seen | None,
    current: str,
    missing: tuple[str, ...],
    *,
    now: float,
    stall_after_s: float,
) -> Check:
    """The pure decision of one check of a job that has no report yet."""
    if seen is None or seen.fingerprint != current:
        resends = seen.resends if seen is not None else 0
        return Check(Action.WAIT, Seen(current, now, resends))
    if now - seen.since < stall_after_s:
        return Check(Action.WAIT, seen)
    again = Seen(current, now, seen.resends + 1)
    if missing and seen.resends < MAX_RESENDS:
        return Check(Action.RESEND_NODES, again, missing)
    return Check(Action.AGGREGATE, again)


def check_job(store: JobStore, settings: Settings, job_id: str, seen: Seen | None) -> Check:
    """Look at a job once (see the module docstring)."""
    try:
        spec = store.spec(job_id)
        if store.report(job_id) is not None:
            return Check(Action.DONE, seen or Seen("", time.time()))
        ended = {env.node_id for env in store.envelopes(job_id)}
        progress = store.progress(job_id)
    except JobNotFoundError:  # expired: nothing left to watch
        return Check(Action.DONE, seen or Seen("", time.time()))
    missing = tuple(n for n in spec.node_ids if n not in ended)
    now, stall = time.time(), stall_s(settings)
    return decide(seen, fingerprint(progress), missing, now=now, stall_after_s=stall)


def send_watch(
    app: Celery, settings: Settings, spec: JobSpec, queue: str, suffix: str = ""
) -> None:
    """Start the watch chain of a fan-out (on ``queue``, the aggregation's); nothing in
    embedded mode, where the broker and the workers live and die with one process."""
    if settings.embedded:
        return
    app.signature(
        WATCH_TASK,
        args=(spec.job_id, None),
        queue=queue,
        task_id=f"{spec.job_id}-watch{suffix}",
        argsrepr=f"job={spec.job_id}",
        kwargsrepr=NO_KWARGS,
        countdown=check_every_s(settings),
    ).apply_async()
