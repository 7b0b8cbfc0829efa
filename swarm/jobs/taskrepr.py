"""What operators see of a task in Flower and in worker logs: a short, safe summary.

Celery shows ``argsrepr``/``kwargsrepr`` instead of the raw arguments when a message carries
them. Ours name the job, node, model and input size, never the prompt text or any key (the raw
arguments are ids only, but a summary also keeps Flower's columns readable). Task ids are
``<job_id>-<node_id>``, so Flower's search finds a whole job by its id.
"""

from __future__ import annotations

from swarm.records import JobSpec

NO_KWARGS = "{}"


def subagent_argsrepr(spec: JobSpec, node_id: str, input_chars: int | None) -> str:
    """Summary of one sub-agent task."""
    size = "" if input_chars is None else f" input_chars={input_chars}"
    return f"job={spec.job_id} node={node_id} model={spec.model}{size}"


def subagents_argsrepr(
    spec: JobSpec, node_ids: tuple[str, ...], input_chars: list[int | None]
) -> str:
    """Summary of a task carrying several nodes (swarm.jobs.batch)."""
    known = [n for n in input_chars if n is not None]
    size = f" input_chars={sum(known)}" if known else ""
    span = f"{node_ids[0]}..{node_ids[-1]}"
    return f"job={spec.job_id} nodes={span} ({len(node_ids)}) model={spec.model}{size}"


def aggregate_argsrepr(spec: JobSpec) -> str:
    """Summary of the chord callback (the header results are not shown)."""
    return f"job={spec.job_id} nodes={len(spec.node_ids)} model={spec.aggregate_model}"
