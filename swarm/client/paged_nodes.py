"""A stored report's nodes, read from the job store a page at a time as they are used.

A ``Report`` that the handle reads of a job larger than one page (``SWARM_REPORT_PAGE_NODES``)
holds its summary and this list: iterating reads the pages in node order, an index reads
the page that holds it, and one page is kept at a time; ``dump()`` (``Report.to_dict()``)
reads every node.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from swarm.errors import JobNotFoundError
from swarm.jobs.report import NodeList, node_record
from swarm.records import NodeEnvelope
from swarm.store import JobStore


class PagedNodes(NodeList):
    """``total`` nodes of ``job_id``'s report, read ``page`` at a time."""

    def __init__(self, store: JobStore, job_id: str, total: int, page: int) -> None:
        super().__init__(())
        self._store, self._job_id = store, job_id
        self._total, self._page = total, max(page, 1)
        self._start, self._held = -1, list[NodeEnvelope]()

    def __len__(self) -> int:
        return self._total

    def __repr__(self) -> str:
        return f"PagedNodes({self._total} nodes of {self._job_id}, {self._page} per page)"

    def _read(self, start: int) -> list[NodeEnvelope]:
        """The page that starts at ``start`` (kept until another one is read)."""
        if start != self._start:
            rows = self._store.report_nodes(self._job_id, start, self._page)
            if len(rows) != min(self._page, self._total - start):
                raise JobNotFoundError(
                    f"the report of job {self._job_id} is no longer stored as it was read "
                    "(expired, or the job was resumed); read the handle's report again"
                )
            self._start, self._held = start, [node_record(row) for row in rows]
        return self._held

    def _at(self, position: int) -> NodeEnvelope:
        start = position - position % self._page
        return self._read(start)[position - start]

    def __iter__(self) -> Iterator[NodeEnvelope]:
        for start in range(0, self._total, self._page):
            yield from self._read(start)

    def dump(self) -> list[dict[str, Any]]:
        """Every node as stored, read a page at a time."""
        return list(self._store.iter_report_nodes(self._job_id, page=self._page))
