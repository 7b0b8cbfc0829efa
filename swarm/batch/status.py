"""What `swarm status` says of a running job's batches and deadline (one line each)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from swarm.records import JobSpec
from swarm.store.batches import FileState


def deadline_line(spec: JobSpec, now: float | None = None) -> str | None:
    """``deadline YYYY-MM-DD HH:MM:SS UTC (in N min)``, or None without a deadline."""
    if spec.deadline_at is None:
        return None
    left_s = spec.deadline_at - (time.time() if now is None else now)
    at = datetime.fromtimestamp(spec.deadline_at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    when = f"in {_span(left_s)}" if left_s >= 0 else f"passed {_span(-left_s)} ago"
    return f"deadline {at} ({when})"


def _span(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def file_line(state: FileState) -> str:
    """``batch file 0 (kimi-k2.5, 1000 nodes): in_progress, 400/1000 done, 3 failed``."""
    head = f"batch file {state.index} ({state.model}, {len(state.node_ids)} nodes)"
    if state.batch_id is None and not state.ended:
        return f"{head}: {state.status}"
    counts = f", {state.completed}/{state.total} done, {state.failed} failed" if state.total else ""
    live = f", {state.live_nodes} live" if state.live_nodes else ""
    ended = " (ended)" if state.ended else ""
    error = f"; {state.error}" if state.error else ""
    return f"{head}: {state.batch_id or 'no batch'} {state.status}{counts}{live}{ended}{error}"


def status_lines(spec: JobSpec, files: Sequence[FileState]) -> list[str]:
    """The deadline and one line per batch file (none for a job without either)."""
    deadline = deadline_line(spec)
    return ([deadline] if deadline else []) + [file_line(state) for state in files]


def status_json(spec: JobSpec, files: Sequence[FileState]) -> dict[str, Any]:
    """The same for ``--json``: ``deadline_at`` and ``batches`` (empty when none)."""
    return {
        "deadline_at": spec.deadline_at,
        "batches": [state.model_dump(mode="json", exclude={"node_ids"}) for state in files],
    }
