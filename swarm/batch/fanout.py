"""The chord members of a job's batch files: one poll task per file."""

from __future__ import annotations

from collections.abc import Sequence

from celery import Celery
from celery.canvas import Signature

from swarm.catalog import Catalog
from swarm.jobs.queueing import BATCH_POLL_TASK, job_priority
from swarm.jobs.taskrepr import NO_KWARGS
from swarm.records import JobSpec
from swarm.store.batches import FileState


def poll_signatures(
    app: Celery, catalog: Catalog, spec: JobSpec, files: Sequence[FileState], suffix: str
) -> list[Signature]:
    """The poll task of each file (id ``<job>-batch<i>``), on its model's queue."""
    priority = job_priority(len(spec.node_ids))
    return [
        app.signature(
            BATCH_POLL_TASK,
            args=(spec.job_id, list(state.node_ids), state.index),
            queue=catalog.model(state.model).queue,
            task_id=f"{spec.job_id}-batch{state.index}{suffix}",
            argsrepr=f"job={spec.job_id} batch file {state.index}: {len(state.node_ids)} "
            f"nodes on {state.model}",
            kwargsrepr=NO_KWARGS,
            priority=priority,
        )
        for state in files
    ]
