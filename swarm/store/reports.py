"""A job's final report: its summary, its nodes in pages, and waiting for it (the split
itself: swarm.store.report_pages)."""

from __future__ import annotations

import copy
import json
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from swarm.store.core import MemoryCore, RedisCore, job_key
from swarm.store.report_pages import (
    CHUNK,
    NODES_REF,
    chunks,
    page_bounds,
    page_of,
    public_summary,
    report_entries,
    resolve,
    stored_ids,
)

Fields = Mapping[str, Any]
"""A report or its summary as given to be stored (JSON-shaped fields)."""
REPORT_RECHECK_S = 1.0
"""wait_report reads the report again at least this often (a missed publish costs no more)."""


class ReportStore(ABC):
    """The report part of the JobStore interface."""

    @abstractmethod
    def save_report(self, job_id: str, report: Fields) -> bool:
        """Store the final report unless one exists; True when this call stored it."""

    @abstractmethod
    def report(self, job_id: str) -> dict[str, Any] | None:
        """The final report, once written."""

    def save_report_parts(
        self, job_id: str, summary: Fields, node_lines: Iterable[str], *, ok_stored: bool = False
    ) -> bool:
        """save_report of ``summary`` with ``nodes`` given as one JSON document each (the
        Redis store writes them as they come, without building the whole report).
        ``ok_stored``: the ok nodes are the job's stored envelopes (the Redis store names
        them instead of copying them)."""
        nodes = [json.loads(line) for line in node_lines]
        return self.save_report(job_id, {**summary, "nodes": nodes})

    @abstractmethod
    def report_summary(self, job_id: str) -> dict[str, Any] | None:
        """The final report without its ``nodes``, once written."""

    def report_nodes(
        self, job_id: str, offset: int = 0, limit: int | None = None, *, failed: bool = False
    ) -> list[dict[str, Any]]:
        """A page of the report's nodes in node order (``failed``: of those that did not
        succeed), ``limit`` from ``offset`` (None: to the end); empty before the report."""
        nodes = (self.report(job_id) or {}).get("nodes", [])
        return [dict(node) for node in page_of(nodes, offset, limit, failed)]

    def iter_report_nodes(
        self, job_id: str, *, failed: bool = False, page: int = CHUNK
    ) -> Iterator[dict[str, Any]]:
        """Every node of the report (``failed``: that did not succeed), read a page at a time."""
        offset = 0
        while nodes := self.report_nodes(job_id, offset, page, failed=failed):
            yield from nodes
            offset += len(nodes)

    def wait_report(
        self, job_id: str, timeout_s: float, poll_s: float = 0.05, *, summary: bool = False
    ) -> dict[str, Any] | None:
        """The report once written (``summary``: without its nodes), or None after
        ``timeout_s`` (read again after each ``_report_waits`` wait)."""
        read = self.report_summary if summary else self.report
        with self._report_waits(job_id, poll_s) as wait:
            deadline = time.monotonic() + timeout_s
            while (report := read(job_id)) is None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                wait(remaining)
            return report

    @contextmanager
    def _report_waits(self, job_id: str, poll_s: float) -> Iterator[Callable[[float], object]]:
        """How wait_report waits between two reads, at most the time given: ``poll_s``."""
        yield lambda remaining: time.sleep(min(poll_s, remaining))


class RedisReports(RedisCore, ReportStore):
    """ReportStore on Redis."""

    def save_report(self, job_id: str, report: Fields) -> bool:
        """The report: its nodes in lists beside it, then its summary (SET NX) and the done
        publish; the status beside it, for listing, only by the call that stored it."""
        if "nodes" not in report:
            return self._save_summary(job_id, dict(report), ())
        summary = {k: v for k, v in report.items() if k != "nodes"}
        return self.save_report_parts(job_id, summary, (json.dumps(n) for n in report["nodes"]))

    def save_report_parts(
        self, job_id: str, summary: Fields, node_lines: Iterable[str], *, ok_stored: bool = False
    ) -> bool:
        """The nodes first, in lists of a fresh name (report_pages.CHUNK per command), then
        the summary naming them (SET NX); the lists are deleted again when another report
        was stored first. ``ok_stored``: an ok node's entry names its envelope instead of
        copying it (report_pages.STORED), and the envelopes live as long as the lists."""
        ref = uuid.uuid4().hex[:12]
        nodes_key, failed_key = lists = self._node_lists(job_id, ref)
        pipe = self._r.pipeline(transaction=False)
        position = 0
        for chunk in chunks(node_lines):
            entries, failed = report_entries(chunk, position, ok_stored)
            pipe.rpush(nodes_key, *entries)
            if failed:
                pipe.rpush(failed_key, *failed)
            pipe.execute()
            position += len(chunk)
        for key in (nodes_key, failed_key, *([job_key(job_id, "env")] if ok_stored else [])):
            pipe.expire(key, self._ttl_s)
        pipe.execute()
        return self._save_summary(job_id, {**summary, NODES_REF: ref}, lists)

    def _save_summary(self, job_id: str, summary: dict[str, Any], lists: Sequence[str]) -> bool:
        pipe = self._r.pipeline(transaction=False)
        pipe.set(job_key(job_id, "report"), json.dumps(summary), nx=True, ex=self._ttl_s)
        pipe.publish(job_key(job_id, "done"), "1")
        stored, _ = pipe.execute()
        if stored:
            self._r.set(job_key(job_id, "outcome"), str(summary.get("status")), ex=self._ttl_s)
        elif lists:
            self._r.delete(*lists)
        return bool(stored)

    def _node_lists(self, job_id: str, ref: str) -> tuple[str, str]:
        return job_key(job_id, f"rnodes:{ref}"), job_key(job_id, f"rfailed:{ref}")

    def _stored_summary(self, job_id: str) -> dict[str, Any] | None:
        raw = self._r.get(job_key(job_id, "report"))
        return json.loads(raw) if raw else None

    @contextmanager
    def _report_waits(self, job_id: str, poll_s: float) -> Iterator[Callable[[float], object]]:
        """Subscribed to the job's ``done`` channel, so the report is read as soon as it is
        written instead of at the next poll (and at least every REPORT_RECHECK_S)."""
        pubsub = self._r.pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call, unused-ignore]
        try:
            pubsub.subscribe(job_key(job_id, "done"))
            yield lambda remaining: pubsub.get_message(timeout=min(remaining, REPORT_RECHECK_S))
        finally:
            pubsub.close()

    def report(self, job_id: str) -> dict[str, Any] | None:
        """The summary with every node read back (in pages of report_pages.CHUNK)."""
        summary = self._stored_summary(job_id)
        if summary is None or NODES_REF not in summary:
            return summary
        nodes = list(self.iter_report_nodes(job_id))
        return {**public_summary(summary), "nodes": nodes}

    def report_summary(self, job_id: str) -> dict[str, Any] | None:
        """One GET: the summary as stored."""
        summary = self._stored_summary(job_id)
        return None if summary is None else public_summary(summary)

    def report_nodes(
        self, job_id: str, offset: int = 0, limit: int | None = None, *, failed: bool = False
    ) -> list[dict[str, Any]]:
        """LRANGE of the page (``failed``: of the failed positions, then those nodes)."""
        summary = self._stored_summary(job_id)
        if summary is None or NODES_REF not in summary:
            return super().report_nodes(job_id, offset, limit, failed=failed)
        nodes_key, failed_key = self._node_lists(job_id, str(summary[NODES_REF]))
        start, stop = page_bounds(offset, limit, self._r.llen(failed_key if failed else nodes_key))
        if stop <= start:
            return []
        if not failed:
            return self._resolved(job_id, self._r.lrange(nodes_key, start, stop - 1))  # type: ignore[arg-type]
        pipe = self._r.pipeline(transaction=False)
        for position in self._r.lrange(failed_key, start, stop - 1):
            pipe.lindex(nodes_key, int(position))
        return self._resolved(job_id, [str(raw) for raw in pipe.execute() if raw])

    def _resolved(self, job_id: str, entries: list[str]) -> list[dict[str, Any]]:
        """The nodes of a node list's entries, the named envelopes read in one HMGET."""
        ids = stored_ids(entries)
        found: list[str | None] = self._r.hmget(job_key(job_id, "env"), ids) if ids else []  # type: ignore[assignment]
        return resolve(entries, dict(zip(ids, found, strict=True)))


class MemoryReports(MemoryCore, ReportStore):
    """ReportStore in process."""

    def save_report(self, job_id: str, report: Fields) -> bool:
        with self._lock:
            job = self._job(job_id)
            if job.report is not None:
                return False
            job.report = copy.deepcopy(dict(report))
            return True

    def report(self, job_id: str) -> dict[str, Any] | None:
        with self._lock:
            report = self._job(job_id).report
            return copy.deepcopy(report) if report is not None else None

    def report_summary(self, job_id: str) -> dict[str, Any] | None:
        """The report without its nodes (none of them copied)."""
        with self._lock:
            report = self._job(job_id).report
            if report is None:
                return None
            return copy.deepcopy({k: v for k, v in report.items() if k != "nodes"})

    def report_nodes(
        self, job_id: str, offset: int = 0, limit: int | None = None, *, failed: bool = False
    ) -> list[dict[str, Any]]:
        """The page's nodes, copied alone."""
        with self._lock:
            nodes = (self._job(job_id).report or {}).get("nodes", [])
            return copy.deepcopy([dict(node) for node in page_of(nodes, offset, limit, failed)])
