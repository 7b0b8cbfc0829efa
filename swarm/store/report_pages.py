"""A stored report in two parts: its summary, and its nodes read in pages.

A report holds every node's envelope, so it grows with the job. The store keeps the
summary (every field but ``nodes``) in one small key and the nodes in a list beside it,
in node order, with a second list of the failed nodes' positions; ``swarm status`` reads
the summary, ``--nodes`` reads one page. The summary names its lists (``NODES_REF``):
they are written under a fresh name before the summary, so a summary that exists always
names complete lists, and a report written again (a resumed job) names its own. The
aggregation's successful nodes are the job's stored envelopes, which never change once
ok: their entries name them (``STORED``) instead of holding a second copy.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

NODES_REF = "_nodes"
"""The summary's field naming its node lists (removed before the summary is returned)."""
CHUNK = 1000
"""Nodes written or read per Redis command."""
T = TypeVar("T")


STORED = "@"
"""A node list's entry ``@<node id>``: the node is the job's stored envelope of that id
(an ok envelope is final, so the report need not copy it)."""


def report_entries(
    lines: Sequence[str], first: int, ok_stored: bool
) -> tuple[list[str], list[int]]:
    """The node list's entries for ``lines`` (the first at position ``first``) and the
    positions of the nodes that did not succeed; ``ok_stored``: the successful nodes are
    the job's stored envelopes, and their entries name them instead of copying them."""
    entries: list[str] = []
    failed: list[int] = []
    for index, line in enumerate(lines):
        node = json.loads(line)
        if node.get("status") != "ok":
            failed.append(first + index)
            entries.append(line)
        else:
            entries.append(STORED + str(node["node_id"]) if ok_stored else line)
    return entries, failed


def stored_ids(entries: Iterable[str]) -> list[str]:
    """The node ids the entries name (those that are not copies)."""
    return [entry[len(STORED) :] for entry in entries if entry.startswith(STORED)]


def resolve(entries: Iterable[str], stored: Mapping[str, str | None]) -> list[dict[str, Any]]:
    """The nodes of ``entries``, each named one taken from ``stored`` (node id -> envelope
    JSON); a named node that is no longer stored is left out."""
    nodes = []
    for entry in entries:
        raw = stored.get(entry[len(STORED) :]) if entry.startswith(STORED) else entry
        if raw:
            nodes.append(json.loads(raw))
    return nodes


def public_summary(summary: Mapping[str, Any]) -> dict[str, Any]:
    """The stored summary without its reference to the node lists (nor ``nodes``)."""
    return {k: v for k, v in summary.items() if k not in (NODES_REF, "nodes")}


def chunks(items: Iterable[T], size: int = CHUNK) -> Iterator[list[T]]:
    """``items`` in runs of ``size`` (consumed as they come)."""
    rest = iter(items)
    while run := list(itertools.islice(rest, size)):
        yield run


def page_of(
    nodes: Sequence[Mapping[str, Any]], offset: int, limit: int | None, failed: bool
) -> list[Mapping[str, Any]]:
    """The page of ``nodes`` (``failed``: of those that did not succeed) that ``limit``
    from ``offset`` takes (None: to the end)."""
    if failed:
        nodes = [node for node in nodes if node.get("status") != "ok"]
    start, stop = page_bounds(offset, limit, len(nodes))
    return list(nodes[start:stop])


def page_bounds(offset: int, limit: int | None, length: int) -> tuple[int, int]:
    """[start, stop) of a page of ``limit`` items from ``offset`` (None: to the end)."""
    start = min(max(offset, 0), length)
    stop = length if limit is None else min(start + max(limit, 0), length)
    return start, stop
