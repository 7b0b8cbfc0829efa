"""How a job's nodes become task messages: one chord header of sub-agent tasks.

A task carries one node (``swarm.subagent``, id ``<job>-<node>``) or, for wide jobs,
several nodes of the same queue (``swarm.subagents``, id ``<job>-<first>-<last>``; see
swarm.batch for why and how they run). Auto batching keeps small jobs at one node per
task, so they look in Flower exactly as before.
"""

from __future__ import annotations

from collections.abc import Sequence

from celery import Celery
from celery.canvas import Signature

from swarm.catalog import Catalog
from swarm.queueing import SUBAGENT_TASK, SUBAGENTS_TASK, job_priority
from swarm.records import JobSpec
from swarm.taskrepr import NO_KWARGS, subagent_argsrepr, subagents_argsrepr

AUTO_NODES_PER_STEP = 25
"""Auto batching: one more node per task for every this many nodes in the job ..."""
AUTO_MAX_PER_TASK = 16
"""... up to this many nodes per task."""


def nodes_per_task(setting: int, job_nodes: int) -> int:
    """Nodes per task message: the setting, or (0 = auto) 1 for jobs up to 49 nodes, then
    one more per 25 nodes up to 16 (100 nodes: 4 per task; 400 or more: 16)."""
    if setting > 0:
        return setting
    return max(1, min(AUTO_MAX_PER_TASK, job_nodes // AUTO_NODES_PER_STEP))


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
    # Smaller jobs first (swarm.queueing.job_priority): a 10-input job is not queued behind
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
