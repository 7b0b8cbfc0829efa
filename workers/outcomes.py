"""What a worker logs of each node and each report it ends: one line per node, however
many nodes its task carried (a batched task logs each of its nodes), and one per report.

A node that succeeded, and one cancelled with its job, is an INFO line; any other failure
is a WARNING with its error (which names the URL the call went to), as is a report that
did not succeed: a wrong key or a dead gateway shows in the worker's log at its default
level, not only in the report.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from swarm.records import ErrorKind, NodeEnvelope

log = logging.getLogger(__name__)

QUIET_KINDS = frozenset({ErrorKind.CANCELLED})
"""Failures the user asked for: said at INFO."""
COMPLETED = frozenset({"succeeded", "partial"})
"""Report statuses of a swarm that completed (the contract's exit status 0)."""


def node_line(job_id: str, envelope: NodeEnvelope) -> tuple[int, str]:
    """``job J node N: ok on MODEL, 1 attempts, 1180 ms`` and its level (a failure: its
    kind in place of ``ok``, its error after the figures, at WARNING)."""
    outcome = envelope.error_kind or "ok"
    head = (
        f"job {job_id} node {envelope.node_id}: {outcome} on {envelope.model}, "
        f"{envelope.attempts} attempts, {envelope.latency_ms} ms"
    )
    if envelope.ok or envelope.error_kind in QUIET_KINDS:
        return logging.INFO, head
    return logging.WARNING, f"{head}: {envelope.error}"


def log_nodes(job_id: str, envelopes: Iterable[NodeEnvelope]) -> None:
    """One line per node of a task, written as one log record per level: a batched task's
    lines go out in one write, not one write (and one GIL hand-off) per node."""
    by_level: dict[int, list[str]] = {}
    for envelope in envelopes:
        level, line = node_line(job_id, envelope)
        by_level.setdefault(level, []).append(line)
    for level, lines in sorted(by_level.items()):
        if log.isEnabledFor(level):
            log.log(level, "%s", "\n".join(lines))


def log_report(job_id: str, report: Mapping[str, Any]) -> None:
    """``job J: succeeded, 16/16 sub-agents succeeded`` at INFO; a job that did not
    complete, or whose aggregation failed, at WARNING with its reason."""
    status = report.get("status")
    counts = f"{report.get('succeeded', 0)}/{report.get('total', 0)} sub-agents succeeded"
    error = report.get("error")
    if status in COMPLETED and not error:
        log.info("job %s: %s, %s", job_id, status, counts)
    elif status == "cancelled":
        log.info("job %s: cancelled, %s", job_id, counts)
    else:
        log.warning("job %s: %s, %s: %s", job_id, status, counts, error or "no reason given")
