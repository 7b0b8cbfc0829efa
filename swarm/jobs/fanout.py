"""How a job's nodes become task messages: one chord header of sub-agent tasks.

A task carries one node (``swarm.subagent``, id ``<job>-<node>``) or, for wide jobs,
several nodes of the same queue (``swarm.subagents``, id ``<job>-<first>-<last>``; see
swarm.jobs.batch for why and how they run). Auto batching keeps small jobs at one node per
task, so each of their tasks in Flower is one node.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from celery import Celery
from celery.canvas import Signature

from swarm.catalog import Catalog
from swarm.jobs.queueing import SUBAGENT_TASK, SUBAGENTS_TASK, job_priority
from swarm.jobs.taskrepr import NO_KWARGS, subagent_argsrepr, subagents_argsrepr
from swarm.records import JobSpec

AUTO_FIRST_BATCHED = 50
"""Auto batching: jobs smaller than this send one node per task ..."""
AUTO_MESSAGES_PER_JOB = 10
"""... larger ones about this many messages (each message costs the producer a publish,
dearer while the workers already run the first ones, and the job's wall time follows its
last message: ops/bench/results/README.md, Overhead) ..."""
AUTO_MAX_PER_TASK = 16
"""... with at most this many nodes per task."""


def nodes_per_task(setting: int, job_nodes: int) -> int:
    """Nodes per task message: the setting, or (0 = auto) 1 for jobs up to 49 nodes, then
    about ten messages per job, at most 16 nodes each (100 nodes: 10 per task; 160 or
    more: 16)."""
    if setting > 0:
        return setting
    if job_nodes < AUTO_FIRST_BATCHED:
        return 1
    return min(AUTO_MAX_PER_TASK, -(-job_nodes // AUTO_MESSAGES_PER_JOB))


NodeSize = tuple[str, int | None]
"""A node id and its input's length in characters (None: unknown)."""


def node_batches(
    spec: JobSpec, nodes: Iterable[NodeSize], catalog: Catalog, per_task: int
) -> Iterator[tuple[str, tuple[NodeSize, ...]]]:
    """(queue, nodes) per task, as ``nodes`` are read: nodes of one queue in input order,
    ``per_task`` at most; a queue's batch goes out once full (the rest at the end), so at
    most ``per_task`` nodes per queue are held."""
    pending: dict[str, list[NodeSize]] = {}
    queue_of = _queue_of(spec, catalog)
    for node in nodes:
        queue = queue_of(node[0])
        batch = pending.setdefault(queue, [])
        batch.append(node)
        if len(batch) >= per_task:
            yield queue, tuple(batch)
            batch.clear()
    for queue, batch in pending.items():
        if batch:
            yield queue, tuple(batch)


def _queue_of(spec: JobSpec, catalog: Catalog) -> Callable[[str], str]:
    """The queue of a node: its own task's model's, else the job's (looked up once)."""
    default = catalog.model(spec.model).queue
    if not spec.tasks:
        return lambda node_id: default
    return lambda node_id: catalog.model(spec.task(node_id).model).queue


def header_signatures(
    app: Celery,
    catalog: Catalog,
    spec: JobSpec,
    nodes: Iterable[NodeSize],
    *,
    per_task: int,
    suffix: str = "",
) -> Iterator[Signature]:
    """The chord header sending ``nodes`` of ``spec``, ``per_task`` nodes per message, made
    as they are read (one task's nodes held at a time per queue)."""
    # Smaller jobs first (swarm.jobs.queueing.job_priority): a 10-input job is not queued behind
    # the 1000 tasks of a job submitted before it.
    priority = job_priority(len(spec.node_ids))
    for queue, batch in node_batches(spec, nodes, catalog, per_task):
        ids = tuple(node_id for node_id, _ in batch)
        args: tuple[str, str | list[str]]
        if len(ids) == 1:
            name, args = SUBAGENT_TASK, (spec.job_id, ids[0])
            task_id = f"{spec.job_id}-{ids[0]}{suffix}"
            # Flower and logs show this summary instead of the arguments.
            summary = subagent_argsrepr(spec, ids[0], batch[0][1])
        else:
            name, args = SUBAGENTS_TASK, (spec.job_id, list(ids))
            task_id = f"{spec.job_id}-{ids[0]}-{ids[-1]}{suffix}"
            summary = subagents_argsrepr(spec, ids, [size for _, size in batch])
        yield app.signature(
            name,
            args=args,
            queue=queue,
            task_id=task_id,
            argsrepr=summary,
            kwargsrepr=NO_KWARGS,
            priority=priority,
        )
