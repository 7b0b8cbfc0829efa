"""Sending a stored job: its chord of sub-agent nodes and aggregation, its batch files'
polls when a deadline sends nodes through the Batch API, and its watchdog."""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Iterable, Sequence

from celery import Celery
from celery.canvas import Signature

from swarm import tracing
from swarm.batch.fanout import poll_signatures
from swarm.batch.plan import plan_batches
from swarm.catalog import Catalog
from swarm.client.sent import SentNodes
from swarm.jobs.fanout import NodeSize, header_signatures, nodes_per_task
from swarm.jobs.queueing import AGGREGATE_TASK
from swarm.jobs.streamed_chord import send_chord
from swarm.jobs.taskrepr import NO_KWARGS, aggregate_argsrepr
from swarm.jobs.watchdog import send_watch
from swarm.records import JobSpec
from swarm.settings import Settings
from swarm.store import JobStore
from swarm.store.batches import batch_store


def send_job(
    parts: tuple[Celery, Settings, Catalog, JobStore],
    spec: JobSpec,
    input_chars: Iterable[int | None],
    only: Sequence[str] | None,
    suffix: str,
    watch: bool,
) -> None:
    """Send the job's chord through the client's ``parts`` (its app, settings, catalog and
    job store); SwarmClient.fan_out says what the other arguments do."""
    app, settings, catalog, store = parts
    wanted = None if only is None else set(only)
    nodes: Iterable[NodeSize] = (
        (node_id, size)
        for node_id, size in itertools.zip_longest(spec.node_ids, input_chars)
        if node_id is not None and (wanted is None or node_id in wanted)
    )
    aggregate_queue = catalog.model(spec.aggregate_model).queue
    per_task = nodes_per_task(settings.nodes_per_task, len(spec.node_ids))
    polls: list[Signature] = []
    if spec.deadline_at is not None and only is None:  # resends and resumes run live
        sizes = dict(nodes)  # batch planning weighs every node at once
        planned = plan_batches(spec, catalog, list(sizes), sizes, time.time())
        batch_store(store).plan(spec.job_id, planned.files)
        nodes = [(node_id, sizes[node_id]) for node_id in planned.live]
        polls = poll_signatures(app, catalog, spec, planned.files, suffix)
    counted = SentNodes(store, spec.job_id, settings.submit_chunk_nodes)
    counted.start()
    header = itertools.chain(
        header_signatures(
            app, catalog, spec, counted.reading(nodes), per_task=per_task, suffix=suffix
        ),
        polls,
    )
    body = app.signature(
        AGGREGATE_TASK,
        args=(spec.job_id,),
        queue=aggregate_queue,
        task_id=f"{spec.job_id}-aggregate{suffix}",
        argsrepr=aggregate_argsrepr(spec),
        kwargsrepr=NO_KWARGS,
    )
    with tracing.job_step(spec, "fan_out", resend=bool(suffix)):
        send_chord(app, header, body, uuid.uuid4().hex, on_sent=counted.sent)
    counted.done()
    if watch:
        send_watch(app, settings, spec, aggregate_queue, suffix, store)
