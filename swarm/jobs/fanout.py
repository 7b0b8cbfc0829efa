"""How a job's nodes become task messages: one chord header of sub-agent tasks.

A task carries one node (``swarm.subagent``, id ``<job>-<node>``) or, for wide jobs,
several nodes of the same queue (``swarm.subagents``, id ``<job>-<first>-<last>``; see
swarm.jobs.batch for why and how they run). Auto batching keeps small jobs at one node per
task, so each of their tasks in Flower is one node.
"""

from __future__ import annotations

from collections.abc import Sequence

from celery import Celery
from celery.canvas import Signature

from swarm.catalog import Catalog
from swarm.jobs.queueing import SUBAGENT_TASK, SUBAGENTS_TASK, job_priority
from swarm.jobs.taskrepr import NO_KWARGS, subagent_argsrepr, subagents_argsrepr
from swarm.records import JobSpec

AUTO_FIRST_BATCHED = 50
"""Auto batching: jobs smaller than this send one node per task ..."""
AUTO_MESSAGES_PER_JOB = 10
"""... larger ones about this many messages (publishing a message costs the producer
about 1.2 ms, and several times that while the workers already run the first ones: the
last message of a 100-wide job went out 176 ms after the first at 4 nodes per message,
and the job's wall time follows its last message) ..."""
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


def node_batches(
    spec: JobSpec, node_ids: Sequence[str], catalog: Catalog, per_task: int
) -> list[tuple[str, tuple[str, ...]]]:
    """(queue, node ids) per task: nodes of one queue in input order, ``per_task`` at most."""
    by_queue: dict[str, list[str]] = {}
    for node_id in node_ids:
        by_queue.setdefault(catalog.model(spec.task(node_id).model).queue, []).append(node_id)
    return [
        (queue, tuple(nodes[start : start + per_task]))
        for queue, nodes in by_queue.items()
        for start in range(0, len(nodes), per_task)
    ]


def header_signatures(
    app: Celery,
    catalog: Catalog,
    spec: JobSpec,
    node_ids: Sequence[str],
    sizes: dict[str, int | None],
    *,
    per_task: int,
    suffix: str = "",
) -> list[Signature]:
    """The chord header sending ``node_ids`` of ``spec``, ``per_task`` nodes per message."""
    # Smaller jobs first (swarm.jobs.queueing.job_priority): a 10-input job is not queued behind
    # the 1000 tasks of a job submitted before it.
    priority = job_priority(len(spec.node_ids))
    header = []
    for queue, nodes in node_batches(spec, node_ids, catalog, per_task):
        args: tuple[str, str | list[str]]
        if len(nodes) == 1:
            name, args = SUBAGENT_TASK, (spec.job_id, nodes[0])
            task_id = f"{spec.job_id}-{nodes[0]}{suffix}"
            # Flower and logs show this summary instead of the arguments.
            summary = subagent_argsrepr(spec, nodes[0], sizes.get(nodes[0]))
        else:
            name, args = SUBAGENTS_TASK, (spec.job_id, list(nodes))
            task_id = f"{spec.job_id}-{nodes[0]}-{nodes[-1]}{suffix}"
            summary = subagents_argsrepr(spec, nodes, [sizes.get(n) for n in nodes])
        header.append(
            app.signature(
                name,
                args=args,
                queue=queue,
                task_id=task_id,
                argsrepr=summary,
                kwargsrepr=NO_KWARGS,
                priority=priority,
            )
        )
    return header
