"""Thin task adapters: decode arguments, call the domain, return a small result.

Results are small on purpose: every header result is sent to the chord callback, so the
envelopes themselves stay in the job store and the callback reads them from there.
"""

from __future__ import annotations

import logging
import math
from dataclasses import asdict
from typing import Any

from celery import Celery, Task
from celery.exceptions import Ignore

from swarm.calls.request import pack_progress, unpack_progress
from swarm.client import SwarmClient
from swarm.errors import LeaseLostError, RetryLater
from swarm.jobs.aggregation import run_aggregation
from swarm.jobs.batch import progress_of, run_nodes
from swarm.jobs.planner import run_plan
from swarm.jobs.queueing import AGGREGATE_TASK, PLAN_TASK, SUBAGENT_TASK, SUBAGENTS_TASK, WATCH_TASK
from swarm.jobs.subagent import NodeCall, run_node
from swarm.jobs.watchdog import Action, Seen, check_every_s, check_job, probe_job
from swarm.store.outages import STORE_OUTAGES
from workers import deferral, intake, leases, outcomes, process

log = logging.getLogger(__name__)
STORE_RETRY_S = 2.0
"""Countdown of a task sent again because Redis was unreachable."""
PUBLISH_RETRY_MAX_S = 1.0
"""Longest pause between two tries to send a task again while the broker is unreachable."""


def subagent(
    self: Task, job_id: str, node_id: str, progress: dict[str, list[float]] | None = None
) -> dict[str, Any]:
    """One sub-agent node; never raises for gateway failures (they become envelopes).

    Admission decides when a node waits in the queue instead of in this slot (RetryLater);
    this adapter only applies it, carrying the call's attempts and start time (``progress``)
    to the next run. run_node stops asking once the requeue bound is reached.
    """
    rt = process.get()
    may_requeue = self.request.retries < rt.settings.admission_max_requeues
    try:
        with leases.held(self, job_id) as fence:
            call = NodeCall(may_requeue, unpack_progress(progress), fence)
            envelope = run_node(rt, job_id, node_id, call)
    except RetryLater as later:
        args = (job_id, node_id, pack_progress(progress_of(later)))
        raise deferral.retry_later(self, job_id, later.delay_s, args) from None
    except STORE_OUTAGES as exc:
        raise again_later(self, exc) from None
    except LeaseLostError:
        raise Ignore() from None  # taken over while this process was frozen or cut off
    outcomes.log_nodes(job_id, [envelope])
    return {"node_id": envelope.node_id, "status": envelope.status}


def subagents(
    self: Task, job_id: str, node_ids: list[str], progress: dict[str, list[float]] | None = None
) -> dict[str, Any]:
    """Several nodes of one job (swarm.jobs.batch): like ``subagent`` for each, concurrently.

    Nodes that admission sends back to the queue are retried alone (the message is sent
    again with only those nodes); the others are done and stay done.
    """
    rt = process.get()
    may_requeue = self.request.retries < rt.settings.admission_max_requeues
    pool = process.node_pool()
    try:
        with leases.held(self, job_id) as fence, pool.for_job(job_id):
            outcome = run_nodes(
                rt,
                job_id,
                node_ids,
                may_requeue=may_requeue,
                pool=pool,
                on_node_done=intake.node_done_callback(self.request.id, len(node_ids)),
                progress=unpack_progress(progress),
                fence=fence,
            )
    except STORE_OUTAGES as exc:  # the nodes that ended are stored: they are not run again
        raise again_later(self, exc) from None
    except LeaseLostError:
        raise Ignore() from None  # taken over while this process was frozen or cut off
    if outcome.requeue:
        args = (job_id, list(outcome.requeue), pack_progress(outcome.progress))
        raise deferral.retry_later(self, job_id, outcome.delay_s, args) from None
    ok = sum(1 for env in outcome.envelopes if env.ok)
    outcomes.log_nodes(job_id, outcome.envelopes)
    return {"job_id": job_id, "nodes": len(node_ids), "ok": ok}


def aggregate(self: Task, results: list[dict[str, Any]], job_id: str) -> dict[str, Any]:
    """The chord callback: aggregation and the report (read back from the job store)."""
    try:
        with leases.held(self, job_id):
            report = run_aggregation(process.get(), job_id)
    except STORE_OUTAGES as exc:
        raise again_later(self, exc) from None
    except LeaseLostError:
        raise Ignore() from None  # taken over while this process was frozen or cut off
    outcomes.log_report(job_id, report)
    return {"job_id": job_id, "status": report["status"]}


def plan(self: Task, job_id: str) -> dict[str, Any]:
    """The planner step: plan (swarm.jobs.planner), then fan out the planned chord from here."""
    rt = process.get()
    try:
        spec = run_plan(rt, job_id)
        if spec is None:
            return {"job_id": job_id, "status": "failed"}
        SwarmClient(rt.settings, rt.catalog, rt.store, self.app).fan_out(spec)
    except STORE_OUTAGES as exc:
        raise again_later(self, exc) from None
    except LeaseLostError:
        raise Ignore() from None  # taken over while this process was frozen or cut off
    return {"job_id": job_id, "nodes": len(spec.node_ids)}


def watch(self: Task, job_id: str, seen: dict[str, Any] | None = None) -> dict[str, Any]:
    """The job watchdog (swarm.jobs.watchdog): one check, a re-send when the job stalled, and
    the next check (same task id) until the job has its report."""
    rt = process.get()
    try:
        with leases.held(self, job_id):
            check = check_job(rt.store, rt.settings, job_id, Seen.load(seen))
            if check.action is Action.PROBE:
                check = probe_job(self.app, rt.store, rt.catalog, rt.settings, job_id, check)
    except STORE_OUTAGES as exc:
        raise again_later(self, exc) from None
    except LeaseLostError:
        raise Ignore() from None  # taken over while this process was frozen or cut off
    if check.action is Action.DONE:
        return {"job_id": job_id, "watch": "done"}
    if check.action is not Action.WAIT:
        only = list(check.missing) if check.action is Action.RESEND_NODES else []
        log.warning(
            "swarm watchdog: job %s %s; sending %s again",
            job_id,
            check.reason,
            f"{len(only)} node(s) and the aggregation" if only else "the aggregation",
        )
        client = SwarmClient(rt.settings, rt.catalog, rt.store, self.app)
        suffix = f"-w{check.seen.resends}"
        client.fan_out(rt.store.spec(job_id), only=only, suffix=suffix, watch=False)
    next_check = (job_id, asdict(check.seen))
    every_s = check_every_s(rt.settings)
    raise deferral.retry_later(self, job_id, every_s, next_check, hasten=False)


def again_later(task: Task, exc: Exception) -> Exception:
    """Redis is down: send ``task`` again in STORE_RETRY_S (never end it failed: a failed
    chord member stops the aggregation), and end this run ``Ignore``d, acked with no state
    stored (Celery's Retry would store a RETRY state in the result backend, that same
    unreachable Redis, and a run whose state cannot be stored never ends in the threads
    pool: its message stays unacked, holding a prefetch slot for good). If the broker is
    down too (the same Redis failing over behind Sentinel), sending the retry is tried
    again for SWARM_STORE_OUTAGE_S (the worker app's publish retry policy, workers.factory:
    the failover window is waited out, then the retry goes to the promoted primary); past
    that it cannot be sent (Reject), the ack neither, and the broker redelivers the task
    after the visibility timeout."""
    log.warning("swarm: Redis unreachable (%s); task %s runs again", exc, task.request.id)
    task.retry(countdown=STORE_RETRY_S, exc=exc, throw=False)
    ignored: Exception = Ignore()
    return ignored


def outage_retry_policy(outage_s: float) -> dict[str, float | int]:
    """kombu's publish retry policy that keeps sending for about ``outage_s`` (a pause of
    PUBLISH_RETRY_MAX_S at most between tries)."""
    return {
        "max_retries": max(3, math.ceil(outage_s / PUBLISH_RETRY_MAX_S)),
        "interval_start": 0,
        "interval_step": PUBLISH_RETRY_MAX_S / 4,
        "interval_max": PUBLISH_RETRY_MAX_S,
    }


def register(app: Celery) -> None:
    """Register the tasks on ``app`` under their stable names."""
    # max_retries=None: requeues for admission are bounded by SWARM_ADMISSION_MAX_REQUEUES,
    # and a task waiting out a Redis outage (again_later) tries until Redis is back.
    app.task(name=SUBAGENT_TASK, bind=True, acks_late=True, max_retries=None)(subagent)
    app.task(name=SUBAGENTS_TASK, bind=True, acks_late=True, max_retries=None)(subagents)
    app.task(name=AGGREGATE_TASK, bind=True, acks_late=True, max_retries=None)(aggregate)
    app.task(name=PLAN_TASK, bind=True, acks_late=True, max_retries=None)(plan)
    app.task(name=WATCH_TASK, bind=True, acks_late=True, max_retries=None)(watch)
