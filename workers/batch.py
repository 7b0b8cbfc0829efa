"""The batch poll task: one short step of a batch file, re-sent with a countdown.

``swarm.batch.poll`` (id ``<job>-batch<i>``, args ``(job, [nodes], i)``) is a member of the
job's chord like a sub-agent task: it returns once every node of its file has an envelope,
and until then each run does one step (swarm.batch.poll) and sends itself again with a
countdown, so no worker thread waits on a batch. Its message is leased like a sub-agent's
(workers.leases): a worker killed while running it lets the lease lapse and a sweeper
sends it again; between two steps it waits in Redis (workers.deferral), not in a worker.
A cancelled batch that has not ended leaves a settle task (``<job>-batch<i>-settle``,
outside the chord) that records what the gateway billed for it once it ends.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import Celery, Task
from celery.exceptions import Ignore

from swarm.batch.poll import poll_file
from swarm.errors import LeaseLostError
from swarm.jobs.queueing import BATCH_POLL_TASK
from swarm.jobs.taskrepr import NO_KWARGS
from swarm.store.outages import STORE_OUTAGES
from workers import deferral, leases, process
from workers.tasks import again_later

log = logging.getLogger(__name__)
SETTLE_AFTER_S = 1.0
"""Countdown of a settle task's first step."""


def poll(
    self: Task, job_id: str, node_ids: list[str], index: int, settle: bool = False
) -> dict[str, Any]:
    """One step of batch file ``index`` of ``job_id`` (``node_ids``: its nodes, for the
    broker census of the watchdog)."""
    rt = process.get()
    try:
        with leases.held(self, job_id) as fence:
            outcome = poll_file(
                rt, job_id, index, pool=process.node_pool(), fence=fence, settle=settle
            )
    except STORE_OUTAGES as exc:
        raise again_later(self, exc) from None
    except LeaseLostError:
        raise Ignore() from None  # taken over while this process was frozen or cut off
    if not outcome.done:
        raise deferral.retry_later(self, job_id, outcome.countdown_s) from None
    if outcome.settle_later:
        settle_id = f"{job_id}-batch{index}-settle"
        settle_step = self.app.signature(
            BATCH_POLL_TASK,
            args=(job_id, node_ids, index),
            kwargs={"settle": True},
            queue=rt.catalog.model(outcome.state.model).queue,
            task_id=settle_id,
            argsrepr=f"job={job_id} batch file {index} (settle)",
            kwargsrepr=NO_KWARGS,
        )
        if rt.leases is None:
            settle_step.apply_async(countdown=SETTLE_AFTER_S)
        else:
            deferral.send_later(job_id, settle_id, settle_step, SETTLE_AFTER_S)
    state = outcome.state
    log.info("job %s batch file %d: %s, %d nodes, %d live", job_id, index, state.status,
             len(state.node_ids), state.live_nodes)  # fmt: skip
    return {"job_id": job_id, "file": index, "status": state.status, "live": state.live_nodes}


def register(app: Celery) -> None:
    """Register the batch task on ``app``."""
    app.task(name=BATCH_POLL_TASK, bind=True, acks_late=True, max_retries=None)(poll)
