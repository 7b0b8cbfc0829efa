"""`swarm status JOB --nodes`: a page of a finished job's nodes, or all of them as JSON lines.

The store keeps a report's nodes apart from its summary (swarm.store.report_pages), so a
page costs the page, whatever the job's size: ``--offset``/``--limit`` (or ``--page``)
choose it, ``--failed`` keeps the nodes that did not succeed, ``--jsonl`` writes one node
per line (every node unless ``--limit`` is given, read a page at a time).
"""

from __future__ import annotations

import itertools
import json
import sys
from dataclasses import dataclass
from typing import Any

from rich.table import Table

from swarm.cli.render import print_json, stdout_console
from swarm.store.base import JobStore

PAGE_SIZE = 50
"""Nodes per page when ``--limit`` is not given (table and ``--json``)."""
SMALL_JOB = 1000
"""`swarm status JOB` of a job up to this many nodes reads its whole report (a review
job's Markdown needs its nodes); a larger one prints the summary."""


@dataclass(frozen=True)
class NodePage:
    """Which nodes to print."""

    offset: int = 0
    limit: int | None = None
    page: int | None = None
    failed: bool = False

    def bounds(self) -> tuple[int, int | None]:
        """(offset, limit); ``page`` (from 1) counts pages of ``limit`` or PAGE_SIZE."""
        size = self.limit or PAGE_SIZE
        if self.page is not None:
            return (max(self.page, 1) - 1) * size, size
        return self.offset, self.limit


def show_nodes(store: JobStore, job_id: str, page: NodePage, fmt: str) -> None:
    """Print the page as a table, a JSON array (``fmt`` json) or JSON lines (jsonl)."""
    offset, limit = page.bounds()
    if fmt == "jsonl":
        _write_jsonl(store, job_id, offset, limit, page.failed)
        return
    nodes = store.report_nodes(job_id, offset, limit or PAGE_SIZE, failed=page.failed)
    if fmt == "json":
        print_json(nodes)
    else:
        stdout_console().print(_table(job_id, nodes, offset))


def _write_jsonl(
    store: JobStore, job_id: str, offset: int, limit: int | None, failed: bool
) -> None:
    if limit is not None:
        nodes: Any = store.report_nodes(job_id, offset, limit, failed=failed)
    else:
        nodes = itertools.islice(store.iter_report_nodes(job_id, failed=failed), offset, None)
    for node in nodes:
        sys.stdout.write(json.dumps(node, ensure_ascii=False) + "\n")


def _table(job_id: str, nodes: list[dict[str, Any]], offset: int) -> Table:
    last = offset + len(nodes)
    table = Table(title=f"job {job_id}: nodes {offset + 1}-{last}" if nodes else "no nodes")
    for col in ("node", "input", "model", "status", "attempts", "ms", "error"):
        table.add_column(col)
    for node in nodes:
        error = f"{node.get('error_kind') or ''} {node.get('error') or ''}".strip()
        table.add_row(
            str(node.get("node_id")),
            str(node.get("input_ref")),
            str(node.get("model")),
            str(node.get("status")),
            str(node.get("attempts", "")),
            str(node.get("latency_ms", "")),
            error[:80],
        )
    return table
