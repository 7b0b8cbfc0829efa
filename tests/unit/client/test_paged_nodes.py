"""A report of more nodes than a page reads them from the store a page at a time as they
are used; to_dict() still gives every node."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import pytest
from doubles import job_spec

from swarm.catalog import load_catalog
from swarm.client import SwarmHandle
from swarm.client.paged_nodes import PagedNodes
from swarm.errors import JobNotFoundError
from swarm.jobs.report import build_report
from swarm.records import NodeEnvelope
from swarm.store import MemoryJobStore

CATALOG = load_catalog()
T = TypeVar("T")


class CountingReads(MemoryJobStore):
    """Records each page of report nodes asked for, and refuses reads of the whole report
    but the ones the memory store's summary and pages are made of."""

    def __init__(self) -> None:
        super().__init__()
        self.pages: list[tuple[int, int | None]] = []
        self.inside = False

    def report_summary(self, job_id: str) -> dict[str, Any] | None:
        return self._inside(lambda: super(CountingReads, self).report_summary(job_id))

    def report_nodes(
        self, job_id: str, offset: int = 0, limit: int | None = None, *, failed: bool = False
    ) -> list[dict[str, Any]]:
        self.pages.append((offset, limit))
        page = super().report_nodes
        return self._inside(lambda: page(job_id, offset, limit, failed=failed))

    def _inside(self, read: Callable[[], T]) -> T:
        self.inside, saved = True, self.inside
        try:
            return read()
        finally:
            self.inside = saved

    def report(self, job_id: str) -> dict[str, Any] | None:
        assert self.inside, "the handle read the whole report"
        return super().report(job_id)


def _job(store: MemoryJobStore, n: int) -> list[NodeEnvelope]:
    spec = job_spec(n)
    store.create_job(spec, ["x"] * n)
    nodes = [
        NodeEnvelope(node_id=node, input_ref=ref, model="kimi-k2.5", status="ok", content=node)
        for node, ref in zip(spec.node_ids, spec.input_refs, strict=True)
    ]
    report = build_report(spec, nodes, {}, CATALOG, status="succeeded", final="m", wall_s=1.0)
    store.save_report("j1", report.to_dict())
    return nodes


def test_a_large_reports_nodes_are_read_a_page_at_a_time() -> None:
    store = CountingReads()
    nodes = _job(store, 10)
    report = SwarmHandle("j1", store, CATALOG, page=3).report()
    assert report is not None and isinstance(report.nodes, PagedNodes)
    assert store.pages == [] and len(report.nodes) == 10  # nothing read until used
    assert list(report.nodes) == nodes
    assert store.pages == [(0, 3), (3, 3), (6, 3), (9, 3)]
    store.pages.clear()
    assert report.nodes[7] == nodes[7] and report.nodes[-1] == nodes[9]
    assert report.nodes[6:8] == nodes[6:8]
    assert store.pages == [(6, 3), (9, 3), (6, 3)]
    with pytest.raises(IndexError):
        report.nodes[10]
    assert report.to_dict()["nodes"] == [env.model_dump(mode="json") for env in nodes]


def test_a_report_within_one_page_is_read_whole_and_wait_gives_the_same() -> None:
    store = CountingReads()
    nodes = _job(store, 3)
    handle = SwarmHandle("j1", store, CATALOG, page=3)
    waited = handle.wait(timeout=1)
    assert not isinstance(waited.nodes, PagedNodes) and list(waited.nodes) == nodes
    assert store.pages == [(0, None)]
    assert SwarmHandle("j1", store, CATALOG, page=2).wait(timeout=1) == waited


def test_nodes_of_a_report_no_longer_stored_raise_job_not_found() -> None:
    store = CountingReads()
    _job(store, 10)
    report = SwarmHandle("j1", store, CATALOG, page=3).report()
    assert report is not None
    store.reopen(store.spec("j1"))  # a resume takes the report away
    with pytest.raises(JobNotFoundError, match="no longer stored"):
        list(report.nodes)
