"""The job store interface and the records it returns."""

from __future__ import annotations

import json
import time
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from swarm.records import ErrorKind, Frozen, JobSpec, NodeEnvelope, Usage
from swarm.store.agents import ToolOutcome, Transcript
from swarm.store.billing import BilledCall, BudgetState, HeldAnswer, StoredAnswer
from swarm.store.companion import Companion
from swarm.store.leases import Lease
from swarm.store.report_pages import CHUNK, page_of

RUNNING, OK, ERROR, CANCELLED = "running", "ok", "error", "cancelled"


def state_of(envelope: NodeEnvelope) -> str:
    """A finished node's state value (``"<state>|<model>"``): a node cancelled with its
    job is counted apart from one that failed."""
    if envelope.ok:
        state = OK
    elif envelope.error_kind == ErrorKind.CANCELLED:
        state = CANCELLED
    else:
        state = ERROR
    return f"{state}|{envelope.model}"


class LedgerLine(Frozen):
    """Billed calls of one model in one job."""

    calls: int = 0
    """Calls the gateway answered (and billed)."""
    usage: Usage = Usage()
    """Their summed usage."""


class ModelProgress(Frozen):
    """Node counts of one model."""

    done: int = 0
    failed: int = 0
    in_flight: int = 0
    cancelled: int = 0


class Progress(Frozen):
    """Where a job stands; counts are of sub-agent nodes."""

    total: int
    """Nodes in the job."""
    done: int
    """Nodes that succeeded."""
    failed: int
    """Nodes that ended with an error envelope (not the cancelled ones)."""
    in_flight: int
    """Nodes currently running."""
    models: dict[str, ModelProgress]
    """The same counts per model."""
    finished: bool = False
    """True once the job's report is written."""
    phase: str | None = None
    """What the job's aggregation is doing (``reduce level 2 of at most 3: 4 calls``,
    ``final merge``), once it started; None before."""
    sent: int | None = None
    """Nodes whose task messages the submit has sent so far, while it is sending (or
    since it stopped half way, swarm.client.sent); None once every node is sent."""
    cancelled: int = 0
    """Nodes that ended cancelled with their job (without calling the gateway)."""

    @property
    def ended(self) -> int:
        """Nodes that ended: succeeded, failed or cancelled."""
        return self.done + self.failed + self.cancelled

    @property
    def pending(self) -> int:
        """Nodes not started yet."""
        return max(self.total - self.ended - self.in_flight, 0)


def progress_from_states(
    total: int,
    states: Mapping[str, str],
    finished: bool,
    phase: str | None = None,
    sent: int | None = None,
) -> Progress:
    """Count node states (``"<state>|<model>"`` per node) into a Progress."""
    return progress_from_counts(total, Counter(states.values()), finished, phase, sent)


def progress_from_counts(
    total: int,
    counts: Mapping[str, int],
    finished: bool,
    phase: str | None = None,
    sent: int | None = None,
) -> Progress:
    """A Progress from how many nodes hold each state value (``"<state>|<model>"``)."""
    per_model: dict[str, dict[str, int]] = {}
    for value, count in counts.items():
        state, _, model = value.partition("|")
        per = per_model.setdefault(model, {"done": 0, "failed": 0, "in_flight": 0, "cancelled": 0})
        key = {OK: "done", ERROR: "failed", RUNNING: "in_flight", CANCELLED: "cancelled"}.get(state)
        if key:
            per[key] += count
    models = {m: ModelProgress(**c) for m, c in sorted(per_model.items())}
    return Progress(
        total=total,
        done=sum(m.done for m in models.values()),
        failed=sum(m.failed for m in models.values()),
        in_flight=sum(m.in_flight for m in models.values()),
        cancelled=sum(m.cancelled for m in models.values()),
        models=models,
        finished=finished,
        phase=phase,
        sent=sent,
    )


CANCELLING = "cancelling"
"""A job's listed status once cancelled and until its report is written."""


class JobSummary(Frozen):
    """One line of ``swarm jobs``: a job as listed by ``JobStore.recent_jobs``."""

    job_id: str
    submitted_at: float
    """Unix time the job was submitted."""
    status: str
    """``running``, ``cancelling`` (cancelled, no report yet), or the report's status."""
    total: int
    """Sub-agent nodes."""
    done: int
    failed: int
    """Nodes that failed (not the cancelled ones)."""
    in_flight: int
    cost_usd: float
    """What the gateway billed the job so far (every call, the aggregation included)."""
    phase: str | None = None
    """The aggregation's phase while it runs (see Progress.phase)."""
    cancelled: int = 0
    """Nodes that ended cancelled with their job."""


def summary_status(report_status: str | None, cancelled: bool) -> str:
    """A listed job's status: the report's, else ``cancelling`` or ``running``."""
    if report_status is not None:
        return report_status
    return CANCELLING if cancelled else "running"


@dataclass(frozen=True)
class NodeBatch:
    """What a task carrying several nodes of one job reads before calling."""

    envelopes: Mapping[str, NodeEnvelope]
    """Stored envelopes of the nodes that have one."""
    texts: Mapping[str, str]
    """Input text of every node asked for."""
    cancelled: bool
    """True once the job is cancelled."""


class HedgeCounts(Frozen):
    """Hedged calls of one job (swarm.calls.hedging)."""

    sent: int = 0
    """Duplicate requests sent for calls that ran past the hedge delay."""
    won: int = 0
    """Hedges whose answer came first (the original was cancelled)."""


def should_replace(existing: NodeEnvelope | None) -> bool:
    """A stored envelope is final once ok; an error may be replaced by a later run."""
    return existing is None or not existing.ok


class JobStore(ABC):
    """Everything about a job that producers, workers and `swarm status` share."""

    @abstractmethod
    def create_job(self, spec: JobSpec, texts: Iterable[str], *, chunk: int = CHUNK) -> None:
        """Store a new job's spec and its inputs (aligned with spec.node_ids; consumed as
        they come, ``chunk`` at a time)."""

    @abstractmethod
    def note_sent(self, job_id: str, nodes: int | None) -> None:
        """Record how many of the job's nodes its submit has sent so far (Progress.sent);
        None once every node is sent."""

    @abstractmethod
    def update_job(self, spec: JobSpec, texts: Iterable[str]) -> None:
        """Replace a job's spec and add its nodes' inputs, keeping its ledger and budget
        (the planner turns a job's documents into planned nodes this way)."""

    @abstractmethod
    def spec(self, job_id: str) -> JobSpec:
        """The job's spec; JobNotFoundError when unknown."""

    @abstractmethod
    def input_text(self, job_id: str, node_id: str) -> str:
        """One node's input text."""

    @abstractmethod
    def mark_running(self, job_id: str, node_id: str, model: str) -> None:
        """Record that a node started (for progress)."""

    @abstractmethod
    def finish_node(self, job_id: str, envelope: NodeEnvelope, fence: Lease | None = None) -> bool:
        """Store a node's envelope unless an ok one is stored already, or the run lost
        ``fence`` (its lease: another run took the node over); True when stored."""

    def record_held(self, job_id: str, held: HeldAnswer) -> None:
        """Write a held answer without its envelope (an error on the way), then
        ``held.also`` alone."""
        self.record_call(job_id, held.call, fence=held.claim)
        if held.also is not None:
            held.also.run()

    def finish_billed_node(
        self, job_id: str, envelope: NodeEnvelope, fence: Lease | None, held: HeldAnswer
    ) -> bool:
        """``record_call`` of the held answer under its claim, then ``finish_node``: the
        billed call is counted whether or not the envelope is stored (RedisJobStore does
        both in one script, with ``held.also`` in its round trip)."""
        self.record_call(job_id, held.call, fence=held.claim)
        stored = self.finish_node(job_id, envelope, fence)
        if held.also is not None:
            held.also.run()
        return stored

    @abstractmethod
    def envelope(self, job_id: str, node_id: str) -> NodeEnvelope | None:
        """A node's stored envelope, if any."""

    @abstractmethod
    def envelopes(self, job_id: str) -> list[NodeEnvelope]:
        """All stored envelopes in node order."""

    @abstractmethod
    def ledger(self, job_id: str) -> dict[str, LedgerLine]:
        """Billed calls per model."""

    @abstractmethod
    def progress(self, job_id: str) -> Progress:
        """Current counts; JobNotFoundError when unknown."""

    @abstractmethod
    def cancel(self, job_id: str) -> None:
        """Flag the job cancelled: nodes that have not called the gateway will not."""

    @abstractmethod
    def cancelled(self, job_id: str) -> bool:
        """True once cancel() was called."""

    @abstractmethod
    def recent_jobs(self, limit: int) -> list[JobSummary]:
        """The ``limit`` jobs submitted last, newest first, from the store's index of jobs
        by submit time (never a scan of keys); a job whose keys expired is not listed."""

    @abstractmethod
    def set_phase(self, job_id: str, phase: str) -> None:
        """Record what the job's aggregation is doing now (shown by progress())."""

    @abstractmethod
    def save_report(self, job_id: str, report: Mapping[str, Any]) -> bool:
        """Store the final report unless one exists; True when this call stored it."""

    @abstractmethod
    def report(self, job_id: str) -> dict[str, Any] | None:
        """The final report, once written."""

    # -- billing: exactly-once ledger, stored answers, budget, claims (swarm.store.billing) --
    @abstractmethod
    def record_call(self, job_id: str, call: BilledCall, fence: Lease | None = None) -> bool:
        """Atomically count a billed call once by its id (ledger and spent budget) and store
        its answer under its key unless one is stored or the run lost ``fence`` (its claim);
        a run that stores its answer under ``fence`` is done with the slot and the claim is
        released with it. True when counted by this call."""

    @abstractmethod
    def answer(self, job_id: str, key: str) -> StoredAnswer | None:
        """The answer stored under an idempotency key, if any."""

    @abstractmethod
    def reserve(
        self, job_id: str, reservation_id: str, amount_nusd: int, *, closing: bool = False
    ) -> bool:
        """Reserve a call's estimated cost (see billing.admits); False when refused."""

    @abstractmethod
    def release(self, job_id: str, reservation_id: str) -> None:
        """Give a reservation back (idempotent)."""

    @abstractmethod
    def budget(self, job_id: str) -> BudgetState:
        """The job's cap, spent and reserved amounts."""

    @abstractmethod
    def claim(self, job_id: str, slot: str, owner: str, ttl_s: float) -> bool:
        """Take the exclusive right to call the gateway for ``slot`` (a node) for ``ttl_s``;
        False while another owner holds it."""

    @abstractmethod
    def unclaim(self, job_id: str, slot: str, owner: str) -> None:
        """Drop ``owner``'s claim on ``slot`` (nothing if it is not ``owner``'s)."""

    # -- leases (swarm.store.leases): heartbeats, fencing, take-over of lapsed tasks --
    @abstractmethod
    def take_task_lease(self, lease: Lease, ttl_s: float, signature: str) -> None:
        """Hold ``lease`` on a running task message for ``ttl_s`` (a later delivery of the
        same message takes it over) and keep ``signature``, the JSON that sends it again."""

    @abstractmethod
    def defer_task(self, lease: Lease, delay_s: float, signature: str) -> None:
        """Keep ``signature`` (the JSON that sends task ``lease``'s message) and list its
        member in the lapse index as due in ``delay_s``, so that a sweeper sends it then:
        a message that must run later waits here, not in one worker's memory. A lease
        held with ``lease``'s token (the run that defers its own next run) is released;
        a lease another run holds stays, and its run's lease decides."""

    @abstractmethod
    def hasten_deferred(self, job_id: str) -> int:
        """Make every deferred task of ``job_id`` (in the index, no run holding its lease)
        due now; how many (a cancel: the nodes waiting in countdowns end at once)."""

    @abstractmethod
    def renew_leases(self, leases: Sequence[Lease], ttl_s: float) -> set[Lease]:
        """Extend each lease still held with its token to live ``ttl_s`` from now at least
        (never shortened); the ones lost."""

    @abstractmethod
    def release_lease(self, lease: Lease) -> None:
        """Drop a lease if it still holds ``lease``'s token."""

    @abstractmethod
    def lapsed_tasks(self, limit: int) -> list[str]:
        """Index members of task leases that lapsed (at most ``limit``)."""

    @abstractmethod
    def take_lapse(self, member: str) -> str | None:
        """Take a lapsed task lease off the index; the signature that sends its message
        again when this caller won the lapse (one winner), else None."""

    @abstractmethod
    def relist_lapse(self, member: str) -> None:
        """Put a lapse this caller won back on the index (sending its message failed), so
        the next sweep tries again."""

    @abstractmethod
    def held_tasks(self, job_id: str, task_ids: Sequence[str]) -> set[str]:
        """Those of ``task_ids`` whose message some run leased: the lease is live, or it
        lapsed and waits in the index for a sweeper (swarm.jobs.lost_messages)."""

    @abstractmethod
    def reopen(self, spec: JobSpec) -> int:
        """Make a finished job resumable: store ``spec`` (its budget may differ), delete the
        report and cancel flag, clear the budget's exhaustion and stale reservations and set
        the cap from ``spec``; returns the resume's number (1, 2, ...)."""

    # -- hedged calls (swarm.calls.hedging) --
    @abstractmethod
    def take_hedge(self, job_id: str, cap: int) -> bool:
        """Count one hedge of the job unless ``cap`` were sent already; True when counted."""

    @abstractmethod
    def hedge_won(self, job_id: str) -> None:
        """Count a hedge whose answer came first."""

    @abstractmethod
    def hedges(self, job_id: str) -> HedgeCounts:
        """The job's hedge counts."""

    # -- 429s the gateway answered, whatever admission does (the report's rate_limited) --
    @abstractmethod
    def count_rate_limited(self, job_id: str, model: str) -> None:
        """Count one 429 answer to a call of the job on ``model``."""

    @abstractmethod
    def rate_limited(self, job_id: str) -> dict[str, int]:
        """429 answers per model."""

    @abstractmethod
    def count_retry(self, job_id: str, model: str) -> None:
        """Count one retry (an attempt after a failed one) of a call of the job on ``model``."""

    @abstractmethod
    def retries(self, job_id: str) -> dict[str, int]:
        """Retries per model."""

    # -- agent nodes (swarm.jobs.agent) --
    @abstractmethod
    def save_tool_result(self, job_id: str, key: str, outcome: ToolOutcome) -> ToolOutcome:
        """Store a tool call's outcome under ``key`` unless one is stored; the stored one."""

    @abstractmethod
    def tool_result(self, job_id: str, key: str) -> ToolOutcome | None:
        """The outcome stored under ``key``, if any."""

    @abstractmethod
    def save_transcript(self, job_id: str, transcript: Transcript) -> None:
        """Store (replace) a node's transcript."""

    @abstractmethod
    def transcript(self, job_id: str, node_id: str) -> Transcript | None:
        """A node's transcript, if it ran with tools."""

    # -- fast paths: defaults built from the methods above (RedisJobStore pipelines them) --
    def load_nodes(self, job_id: str, node_ids: Sequence[str]) -> NodeBatch:
        """Stored envelopes, inputs and the cancel flag of several nodes at once."""
        found = {n: self.envelope(job_id, n) for n in node_ids}
        return NodeBatch(
            envelopes={n: env for n, env in found.items() if env is not None},
            texts={n: self.input_text(job_id, n) for n in node_ids},
            cancelled=self.cancelled(job_id),
        )

    def envelopes_of(self, job_id: str, node_ids: Sequence[str]) -> dict[str, NodeEnvelope]:
        """The stored envelopes of ``node_ids`` (node id -> envelope; none for a node that
        has not ended)."""
        found = {n: self.envelope(job_id, n) for n in node_ids}
        return {n: env for n, env in found.items() if env is not None}

    def not_ended(self, job_id: str, node_ids: Sequence[str]) -> list[str]:
        """Those of ``node_ids`` that have no envelope, in their order (a page of the
        job's nodes: what is read and held grows with ``node_ids``, not with the job)."""
        found = self.envelopes_of(job_id, node_ids)
        return [n for n in node_ids if n not in found]

    def mark_running_many(self, job_id: str, models: Mapping[str, str]) -> None:
        """mark_running for several nodes (node id -> model)."""
        for node_id, model in models.items():
            self.mark_running(job_id, node_id, model)

    def claim_or_answer(
        self,
        job_id: str,
        slot: str,
        owner: str,
        ttl_s: float,
        key: str,
        also: Companion | None = None,
    ) -> tuple[bool, StoredAnswer | None]:
        """``claim`` and the answer stored under ``key``, together; ``also`` (another
        module's command, swarm.store.companion) runs after them."""
        claimed, stored = self.claim(job_id, slot, owner, ttl_s), self.answer(job_id, key)
        if also is not None:
            also.run()
        return claimed, stored

    def save_report_parts(
        self,
        job_id: str,
        summary: Mapping[str, Any],
        node_lines: Iterable[str],
        *,
        ok_stored: bool = False,
    ) -> bool:
        """save_report of ``summary`` with ``nodes`` given as one JSON document each (the
        Redis store writes them as they come, without building the whole report).
        ``ok_stored``: the ok nodes are the job's stored envelopes (the Redis store names
        them instead of copying them)."""
        nodes = [json.loads(line) for line in node_lines]
        return self.save_report(job_id, {**summary, "nodes": nodes})

    def report_summary(self, job_id: str) -> dict[str, Any] | None:
        """The final report without its ``nodes``, once written."""
        report = self.report(job_id)
        return None if report is None else {k: v for k, v in report.items() if k != "nodes"}

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
        ``timeout_s`` (polls every ``poll_s``)."""
        read = self.report_summary if summary else self.report
        deadline = time.monotonic() + timeout_s
        while (report := read(job_id)) is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            time.sleep(min(poll_s, remaining))
        return report
