"""Which nodes of a job go into batch files, and how they are split into files.

A node is eligible when the job has a deadline far enough ahead (more than the live reserve,
swarm.batch.policy), runs without tools, and its model batches (catalog ``batch = true``).
Eligible nodes are grouped by model (one model per file) in job order and cut into files
by the model's ``batch_max_lines`` and, from an estimate of each line's size, its
``batch_max_bytes`` (with a margin; the poll step builds the real lines). The poll step
sends live any node whose input turns out not to fit its model's window.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from swarm.batch.policy import live_reserve_s
from swarm.catalog import Catalog, ModelSpec
from swarm.errors import InputError
from swarm.records import JobSpec
from swarm.store.batches import FileState

LINE_OVERHEAD_BYTES = 512
"""JSON around a line's texts: custom_id, method, url, model, roles, max_tokens."""
ESCAPE_FACTOR = 1.25
"""Bytes per character of a text once JSON-escaped (non-ASCII text escapes longer: margin)."""
BYTES_MARGIN = 0.9
"""Share of the byte limit a file is planned to fill."""


@dataclass(frozen=True)
class BatchPlan:
    """The batch files of a fan-out and the nodes that run live."""

    files: tuple[FileState, ...]
    live: tuple[str, ...]


def eligible(spec: JobSpec, catalog: Catalog, node_id: str, now: float) -> bool:
    """True when ``node_id`` goes into a batch file (see the module docstring)."""
    if spec.deadline_at is None or spec.tools is not None:
        return False
    if spec.deadline_at - now <= live_reserve_s(spec):
        return False
    return catalog.model(spec.task(node_id).model).batch


def line_bytes(spec: JobSpec, node_id: str, chars: int | None) -> int:
    """Estimated bytes of a node's batch line (an unknown size counts as 4,000 chars)."""
    text = len(spec.task(node_id).instruction) + (4_000 if chars is None else chars)
    return LINE_OVERHEAD_BYTES + int(text * ESCAPE_FACTOR)


def plan_batches(
    spec: JobSpec,
    catalog: Catalog,
    node_ids: Sequence[str],
    chars: Mapping[str, int | None],
    now: float,
) -> BatchPlan:
    """Batch files (in job order, one model each) and live nodes of ``node_ids``."""
    by_model: dict[str, list[str]] = {}
    live: list[str] = []
    for node_id in node_ids:
        if eligible(spec, catalog, node_id, now):
            by_model.setdefault(spec.task(node_id).model, []).append(node_id)
        else:
            live.append(node_id)
    files: list[FileState] = []
    for name, nodes in by_model.items():
        for group in split_nodes(spec, catalog.model(name), nodes, chars):
            files.append(FileState(index=len(files), model=name, node_ids=group))
    return BatchPlan(tuple(files), tuple(live))


def split_nodes(
    spec: JobSpec, model: ModelSpec, nodes: Sequence[str], chars: Mapping[str, int | None]
) -> list[tuple[str, ...]]:
    """``nodes`` cut into files of at most the model's lines and (estimated) bytes."""
    room = int(model.batch_max_bytes * BYTES_MARGIN)
    groups: list[tuple[str, ...]] = []
    current: list[str] = []
    size = 0
    for node_id in nodes:
        line = line_bytes(spec, node_id, chars.get(node_id))
        if current and (len(current) >= model.batch_max_lines or size + line > room):
            groups.append(tuple(current))
            current, size = [], 0
        current.append(node_id)
        size += line
    if current:
        groups.append(tuple(current))
    return groups


def check_deadline(deadline_s: float) -> float:
    """``deadline_s`` if it is a positive number of seconds, else InputError."""
    if not deadline_s > 0:
        raise InputError(f"the deadline must be a positive duration, not {deadline_s!r} s")
    return float(deadline_s)
