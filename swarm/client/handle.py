"""A submitted job's handle: where it stands (phase, counts, cost so far) and its report."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from swarm.catalog import Catalog
from swarm.client.idle import waiting_stage
from swarm.client.paged_nodes import PagedNodes
from swarm.errors import JobTimeoutError
from swarm.jobs.report import Report, model_lines, with_late_billing
from swarm.store import JobStore, Progress

log = logging.getLogger(__name__)

WAIT_CHUNK_S = 60.0
"""SwarmHandle.wait without a timeout waits in chunks of this long."""
IDLE_CHECK_S = 5.0
"""How long wait() waits for a job where nothing runs before it asks which of the job's
queues no worker consumes (as the CLI does)."""

IdleCheck = Callable[[str], "str | None"]
"""Given a job id, one line naming the job's queues no running worker consumes (None when
every queue it waits on has one, or when nothing waits)."""

Phase = Literal["nodes", "aggregating", "done"]
"""Where a job is: sub-agents running, every node ended and the report not yet written (the
aggregation runs), or the report written."""


class JobProgress(Progress):
    """A job's progress as SwarmHandle.progress() gives it: units of work, the node
    counts, the phase, and what the gateway billed so far.

    ``total`` and ``done`` count units of work: every sub-agent node and the aggregation
    step (``total`` = ``nodes_total + 1``); ``done`` is the nodes that succeeded, plus one
    once the report is written, so ``done < total`` until the job has ended (and
    ``done == total`` when it ended with every node succeeded). ``failed``, ``cancelled``,
    ``in_flight``, ``pending`` and ``models`` count nodes (``failed`` not the cancelled
    ones). ``nodes_total`` and ``nodes_done`` are the node counts alone: while ``phase`` is
    ``aggregating``, ``nodes_done + failed + cancelled == nodes_total``."""

    total: int
    """Units of work: the job's nodes and its aggregation step."""
    done: int
    """Units of work ended: the nodes that succeeded, and the aggregation step once the
    report is written."""
    nodes_total: int
    """Sub-agent nodes in the job."""
    nodes_done: int
    """Sub-agent nodes that succeeded."""
    phase: Phase
    """``nodes``, ``aggregating`` or ``done`` (see Phase)."""
    step: str | None = None
    """What the aggregation is doing while it runs (``reduce level 2 of at most 3: 4
    calls``, ``final merge of 30 results on kimi-k2.5``); None before it starts."""
    cost_usd: float | None = None
    """USD billed so far, every call the ledger counted (None: the handle has no catalog)."""

    @property
    def pending(self) -> int:
        """Nodes not started yet."""
        return max(self.nodes_total - self.ended - self.in_flight, 0)

    @property
    def ended(self) -> int:
        """Nodes that ended: succeeded, failed or cancelled."""
        return self.nodes_done + self.failed + self.cancelled


def phase_of(progress: Progress) -> Phase:
    """The phase a job's counts imply."""
    if progress.finished:
        return "done"
    if progress.total and progress.ended >= progress.total:
        return "aggregating"
    return "nodes"


@dataclass(frozen=True, eq=False, repr=False)
class SwarmHandle:
    """A submitted job, by id; cheap to create, safe to hold in any process."""

    job_id: str
    store: JobStore
    catalog: Catalog | None = None
    page: int = 1000
    """A report of more nodes than this reads them in pages as they are used."""
    idle_check: IdleCheck | None = None
    """Asks the workers which of the job's queues none consumes (swarm.client.idle)."""

    @property
    def id(self) -> str:
        """The job's id."""
        return self.job_id

    def __repr__(self) -> str:
        return f"SwarmHandle({self.id!r})"

    def progress(self) -> JobProgress:
        """Units of work total and done (the nodes and the aggregation), nodes total, done,
        failed and in flight (per model too), the phase, and the cost so far;
        JobNotFoundError for an unknown job."""
        counts = self.store.progress(self.id)
        cost = None
        if self.catalog is not None:
            lines = model_lines(self.catalog, self.store.ledger(self.id))
            cost = round(sum(line.cost_usd for line in lines.values()), 6)
        fields = {name: value for name, value in counts if name not in ("phase", "total", "done")}
        return JobProgress(
            **fields,
            total=counts.total + 1,
            done=counts.done + int(counts.finished),
            nodes_total=counts.total,
            nodes_done=counts.done,
            phase=phase_of(counts),
            step=counts.phase,
            cost_usd=cost,
        )

    def status(self) -> str | None:
        """The report's status once it is written (``succeeded``, ``partial``, ...), else
        None."""
        summary = self.store.report_summary(self.id)
        return None if summary is None else str(summary.get("status"))

    def done(self) -> bool:
        """True once the job's report is written (whatever its status)."""
        return self.store.progress(self.id).finished

    def report(self) -> Report | None:
        """The final report, or None while the job runs. Its billing includes calls the
        ledger recorded after it was written (``late_calls``; needs the catalog). Its
        ``nodes`` are read from the store a page at a time as they are used when the job has
        more than a page of them (``SWARM_REPORT_PAGE_NODES``)."""
        return self._typed(self.store.report_summary(self.id))

    def _typed(self, summary: dict[str, Any] | None) -> Report | None:
        """The stored summary as a Report, with its late billing (see ``report``)."""
        if summary is None:
            return None
        if self.catalog is not None:
            summary = with_late_billing(summary, self.store.ledger(self.id), self.catalog)
        total = int(summary.get("total", 0))
        if total > self.page:
            nodes: list[dict[str, Any]] | PagedNodes = PagedNodes(
                self.store, self.id, total, self.page
            )
        else:
            nodes = self.store.report_nodes(self.id)
        return Report.from_dict({**summary, "nodes": nodes})

    def wait(self, timeout: float | None = None, poll_s: float = 0.05) -> Report:
        """Block until the report exists and return it; JobTimeoutError after ``timeout``
        seconds. ``report.to_dict()`` is the contract's JSON dict.

        When nothing of the job has run after IDLE_CHECK_S, the workers are asked which of
        its queues none consumes: the line naming them is logged at WARNING, and carried
        by the JobTimeoutError. The Redis store wakes up as soon as the report is written
        (``poll_s`` is the in-memory store's polling interval)."""
        started = time.monotonic()
        deadline = None if timeout is None else started + timeout
        hint: str | None = None
        checked = self.idle_check is None
        while True:
            now = time.monotonic()
            left_s = WAIT_CHUNK_S if deadline is None else deadline - now
            if not checked:
                left_s = min(left_s, started + IDLE_CHECK_S - now)
            waited = self.store.wait_report(self.id, max(left_s, 0.0), poll_s, summary=True)
            if (report := self._typed(waited)) is not None:
                return report
            now = time.monotonic()
            if not checked and now - started >= IDLE_CHECK_S:
                checked, hint = True, self._idle_hint()
                if hint is not None:
                    log.warning("swarm: job %s: %s", self.id, hint)
            if deadline is not None and now >= deadline:
                if not checked:
                    hint = self._idle_hint()
                said = f"job {self.id} has no report after {timeout:.0f} s"
                if hint is not None:  # the job goes on; this wait does not
                    said += f"; {hint.removesuffix(' (still waiting)')}"
                raise JobTimeoutError(said)

    def _idle_hint(self) -> str | None:
        """The idle check's line, unless the job ended or something of it runs."""
        if self.idle_check is None or not waiting_stage(self.store.progress(self.id)):
            return None
        return self.idle_check(self.id)

    def cancel(self) -> None:
        """Stop the job: nodes that have not called the gateway end as cancelled without
        calling it; calls in flight finish and are billed; the report says cancelled.
        Nodes waiting in a countdown (a requeue, a batch's next poll) run at once, to end."""
        self.store.cancel(self.id)
        hastened = self.store.hasten_deferred(self.id)
        log.debug("job %s cancelled: %d deferred task(s) due now", self.id, hastened)
