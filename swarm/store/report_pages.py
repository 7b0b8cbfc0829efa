"""A stored report in two parts: its summary, and its nodes read in pages.

A report holds every node's envelope (about 1 KB each), so a 100,000-node report is a
100 MB document. The store keeps the summary (every field but ``nodes``) in one small key
and the nodes in a list beside it, in node order, with a second list of the failed nodes'
positions; ``swarm status`` reads the summary, ``--nodes`` reads one page. The summary
names its lists (``NODES_REF``): they are written under a fresh name before the summary,
so a summary that exists always names complete lists, and a report written again (a
resumed job) names its own.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

NODES_REF = "_nodes"
"""The summary's field naming its node lists (removed before the summary is returned)."""
CHUNK = 1000
"""Nodes written or read per Redis command."""


@dataclass(frozen=True)
class SplitReport:
    """A report as stored: the summary and the nodes as JSON lines."""

    summary: dict[str, Any]
    nodes: list[str]


def split_report(report: Mapping[str, Any]) -> SplitReport:
    """The summary (without ``nodes``) and each node's JSON."""
    summary = {k: v for k, v in report.items() if k != "nodes"}
    return SplitReport(summary, [json.dumps(node) for node in report.get("nodes", ())])


def failed_positions(lines: Sequence[str], first: int) -> list[int]:
    """Positions of the nodes in ``lines`` (the first at ``first``) that did not succeed."""
    return [first + i for i, line in enumerate(lines) if json.loads(line).get("status") != "ok"]


def public_summary(summary: Mapping[str, Any]) -> dict[str, Any]:
    """The stored summary without its reference to the node lists."""
    return {k: v for k, v in summary.items() if k != NODES_REF}


def chunks(items: Iterable[str], size: int = CHUNK) -> Iterator[list[str]]:
    """``items`` in runs of ``size`` (consumed as they come)."""
    run: list[str] = []
    for item in items:
        run.append(item)
        if len(run) == size:
            yield run
            run = []
    if run:
        yield run


def page_bounds(offset: int, limit: int | None, length: int) -> tuple[int, int]:
    """[start, stop) of a page of ``limit`` items from ``offset`` (None: to the end)."""
    start = min(max(offset, 0), length)
    stop = length if limit is None else min(start + max(limit, 0), length)
    return start, stop
