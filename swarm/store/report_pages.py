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
from collections.abc import Iterable, Mapping
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
    failed: list[int]
    """Positions (in ``nodes``) of the nodes that did not succeed."""


def split_report(report: Mapping[str, Any]) -> SplitReport:
    """The summary (without ``nodes``), each node's JSON and the failed nodes' positions."""
    nodes = list(report.get("nodes", ()))
    summary = {k: v for k, v in report.items() if k != "nodes"}
    failed = [i for i, node in enumerate(nodes) if node.get("status") != "ok"]
    return SplitReport(summary, [json.dumps(node) for node in nodes], failed)


def public_summary(summary: Mapping[str, Any]) -> dict[str, Any]:
    """The stored summary without its reference to the node lists."""
    return {k: v for k, v in summary.items() if k != NODES_REF}


def chunks(items: list[Any], size: int = CHUNK) -> Iterable[list[Any]]:
    """``items`` in runs of ``size``."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


def page_bounds(offset: int, limit: int | None, length: int) -> tuple[int, int]:
    """[start, stop) of a page of ``limit`` items from ``offset`` (None: to the end)."""
    start = min(max(offset, 0), length)
    stop = length if limit is None else min(start + max(limit, 0), length)
    return start, stop
