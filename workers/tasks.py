"""Thin task adapters: decode arguments, call the domain, return a small result.

Results are small on purpose: every header result is sent to the chord callback, so the
envelopes themselves stay in the job store and the callback reads them from there.
"""

from __future__ import annotations

from typing import Any

from celery import Celery, Task

from swarm.aggregation import run_aggregation
from swarm.client import SwarmClient
from swarm.errors import RetryLater
from swarm.planning import run_plan
from swarm.queueing import AGGREGATE_TASK, PLAN_TASK, SUBAGENT_TASK
from swarm.subagent import run_node
from workers import runtime


def subagent(self: Task, job_id: str, node_id: str) -> dict[str, Any]:
    """One sub-agent node; never raises for gateway failures (they become envelopes).

    Admission decides when a node waits in the queue instead of in this slot (RetryLater);
    this adapter only applies it. run_node stops asking once the requeue bound is reached.
    """
    rt = runtime.get()
    may_requeue = self.request.retries < rt.settings.admission_max_requeues
    try:
        envelope = run_node(rt, job_id, node_id, may_requeue=may_requeue)
    except RetryLater as later:
        raise self.retry(countdown=later.delay_s) from None
    return {"node_id": envelope.node_id, "status": envelope.status}


def aggregate(self: Task, results: list[dict[str, Any]], job_id: str) -> dict[str, Any]:
    """The chord callback: aggregation and the report (read back from the job store)."""
    report = run_aggregation(runtime.get(), job_id)
    return {"job_id": job_id, "status": report["status"]}


def plan(self: Task, job_id: str) -> dict[str, Any]:
    """The planner step: plan (swarm.planning), then fan out the planned chord from here."""
    rt = runtime.get()
    spec = run_plan(rt, job_id)
    if spec is None:
        return {"job_id": job_id, "status": "failed"}
    SwarmClient(rt.settings, rt.catalog, rt.store, self.app).fan_out(spec)
    return {"job_id": job_id, "nodes": len(spec.node_ids)}


def register(app: Celery) -> None:
    """Register the tasks on ``app`` under their stable names."""
    # max_retries=None: requeues for admission are bounded by SWARM_ADMISSION_MAX_REQUEUES.
    app.task(name=SUBAGENT_TASK, bind=True, acks_late=True, max_retries=None)(subagent)
    app.task(name=AGGREGATE_TASK, bind=True, acks_late=True)(aggregate)
    app.task(name=PLAN_TASK, bind=True, acks_late=True)(plan)
