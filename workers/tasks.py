"""Thin task adapters: decode arguments, call the domain, return a small result.

Results are small on purpose: every header result is sent to the chord callback, so the
envelopes themselves stay in the job store and the callback reads them from there.
"""

from __future__ import annotations

from typing import Any

from celery import Celery, Task

from swarm.aggregation import run_aggregation
from swarm.queueing import AGGREGATE_TASK, SUBAGENT_TASK
from swarm.subagent import run_node
from workers import runtime


def subagent(self: Task, job_id: str, node_id: str) -> dict[str, Any]:
    """One sub-agent node; never raises for gateway failures (they become envelopes)."""
    envelope = run_node(runtime.get(), job_id, node_id)
    return {"node_id": envelope.node_id, "status": envelope.status}


def aggregate(self: Task, results: list[dict[str, Any]], job_id: str) -> dict[str, Any]:
    """The chord callback: aggregation and the report (read back from the job store)."""
    report = run_aggregation(runtime.get(), job_id)
    return {"job_id": job_id, "status": report["status"]}


def register(app: Celery) -> None:
    """Register the tasks on ``app`` under their stable names."""
    app.task(name=SUBAGENT_TASK, bind=True, acks_late=True)(subagent)
    app.task(name=AGGREGATE_TASK, bind=True, acks_late=True)(aggregate)
