"""In-process job store for the embedded mode and unit tests (thread-safe, not shared)."""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from swarm.cost.pricing import nusd_of_usd, usd_of_nusd
from swarm.errors import JobNotFoundError
from swarm.records import JobSpec, NodeEnvelope
from swarm.store.agents import ToolOutcome, Transcript
from swarm.store.base import (
    RUNNING,
    HedgeCounts,
    JobStore,
    JobSummary,
    LedgerLine,
    Progress,
    progress_from_states,
    should_replace,
    state_of,
    summary_status,
)
from swarm.store.billing import BilledCall, BudgetState, StoredAnswer, admits
from swarm.store.leases import CLAIM, TASK, Lease, parse_member
from swarm.store.report_pages import CHUNK, page_of


@dataclass
class _Job:
    spec: JobSpec
    texts: dict[str, str]
    states: dict[str, str] = field(default_factory=dict)
    envelopes: dict[str, NodeEnvelope] = field(default_factory=dict)
    ledger: dict[str, LedgerLine] = field(default_factory=dict)
    cancelled: bool = False
    report: dict[str, Any] | None = None
    billed: set[str] = field(default_factory=set)
    answers: dict[str, StoredAnswer] = field(default_factory=dict)
    budget: BudgetState = field(default_factory=BudgetState)
    reservations: dict[str, int] = field(default_factory=dict)
    leases: dict[str, tuple[str, float]] = field(default_factory=dict)
    """lease name (``claim:<slot>``, ``task:<id>``) -> (fencing token, monotonic deadline)"""
    signatures: dict[str, str] = field(default_factory=dict)
    """task id -> the signature that sends its message again"""
    resumes: int = 0
    hedges: HedgeCounts = field(default_factory=HedgeCounts)
    rate_limited: dict[str, int] = field(default_factory=dict)
    retries: dict[str, int] = field(default_factory=dict)
    tool_results: dict[str, ToolOutcome] = field(default_factory=dict)
    transcripts: dict[str, Transcript] = field(default_factory=dict)
    phase: str | None = None
    sent: int | None = None


class MemoryJobStore(JobStore):
    """Dictionaries behind one lock."""

    def __init__(self) -> None:
        self._jobs: dict[str, _Job] = {}
        self._lock = threading.Lock()

    def _job(self, job_id: str) -> _Job:
        try:
            return self._jobs[job_id]
        except KeyError:
            raise JobNotFoundError(f"no job {job_id!r}") from None

    def create_job(self, spec: JobSpec, texts: Iterable[str], *, chunk: int = CHUNK) -> None:
        with self._lock:
            job = _Job(spec, dict(zip(spec.node_ids, texts, strict=True)))
            if spec.budget_usd is not None:
                job.budget = BudgetState(cap_nusd=nusd_of_usd(spec.budget_usd))
            self._jobs[spec.job_id] = job

    def update_job(self, spec: JobSpec, texts: Iterable[str]) -> None:
        with self._lock:
            job = self._job(spec.job_id)
            job.spec = spec
            job.texts.update(zip(spec.node_ids, texts, strict=True))

    def spec(self, job_id: str) -> JobSpec:
        with self._lock:
            return self._job(job_id).spec

    def input_text(self, job_id: str, node_id: str) -> str:
        with self._lock:
            return self._job(job_id).texts[node_id]

    def mark_running(self, job_id: str, node_id: str, model: str) -> None:
        with self._lock:
            self._job(job_id).states[node_id] = f"{RUNNING}|{model}"

    def finish_node(self, job_id: str, envelope: NodeEnvelope, fence: Lease | None = None) -> bool:
        with self._lock:
            job = self._job(job_id)
            if fence is not None and not self._holds(job, fence):
                return False
            if not should_replace(job.envelopes.get(envelope.node_id)):
                return False
            job.envelopes[envelope.node_id] = envelope
            job.states[envelope.node_id] = state_of(envelope)
            return True

    def envelope(self, job_id: str, node_id: str) -> NodeEnvelope | None:
        with self._lock:
            return self._job(job_id).envelopes.get(node_id)

    def envelopes(self, job_id: str) -> list[NodeEnvelope]:
        with self._lock:
            job = self._job(job_id)
            return [job.envelopes[n] for n in job.spec.node_ids if n in job.envelopes]

    def ledger(self, job_id: str) -> dict[str, LedgerLine]:
        with self._lock:
            return dict(self._job(job_id).ledger)

    def note_sent(self, job_id: str, nodes: int | None) -> None:
        with self._lock:
            self._job(job_id).sent = nodes

    def progress(self, job_id: str) -> Progress:
        with self._lock:
            job = self._job(job_id)
            total, finished = len(job.spec.node_ids), job.report is not None
            return progress_from_states(total, job.states, finished, job.phase, job.sent)

    def cancel(self, job_id: str) -> None:
        with self._lock:
            self._job(job_id).cancelled = True

    def cancelled(self, job_id: str) -> bool:
        with self._lock:
            return self._job(job_id).cancelled

    def recent_jobs(self, limit: int) -> list[JobSummary]:
        with self._lock:
            jobs = sorted(self._jobs.values(), key=lambda j: j.spec.submitted_at, reverse=True)
            return [self._summary(job) for job in jobs[: max(limit, 0)]]

    @staticmethod
    def _summary(job: _Job) -> JobSummary:
        report_status = None if job.report is None else str(job.report.get("status"))
        progress = progress_from_states(len(job.spec.node_ids), job.states, False)
        return JobSummary(
            job_id=job.spec.job_id,
            submitted_at=job.spec.submitted_at,
            status=summary_status(report_status, job.cancelled),
            total=progress.total,
            done=progress.done,
            failed=progress.failed,
            in_flight=progress.in_flight,
            cancelled=progress.cancelled,
            cost_usd=usd_of_nusd(job.budget.spent_nusd),
            phase=None if job.report is not None else job.phase,
        )

    def set_phase(self, job_id: str, phase: str) -> None:
        with self._lock:
            self._job(job_id).phase = phase

    def save_report(self, job_id: str, report: Mapping[str, Any]) -> bool:
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

    def record_call(self, job_id: str, call: BilledCall, fence: Lease | None = None) -> bool:
        with self._lock:
            job = self._job(job_id)
            fenced = fence is not None and not self._holds(job, fence)
            if call.answer_key is not None and call.answer is not None and not fenced:
                job.answers.setdefault(call.answer_key, call.answer)
                if fence is not None:  # the slot is done: its claim ends with the answer
                    job.leases.pop(fence.name, None)
            if call.call_id in job.billed:
                return False
            job.billed.add(call.call_id)
            line = job.ledger.get(call.model, LedgerLine())
            job.ledger[call.model] = LedgerLine(calls=line.calls + 1, usage=line.usage + call.usage)
            spent = job.budget.spent_nusd + call.cost_nusd
            job.budget = job.budget.model_copy(update={"spent_nusd": spent})
            return True

    def answer(self, job_id: str, key: str) -> StoredAnswer | None:
        with self._lock:
            return self._job(job_id).answers.get(key)

    def reserve(
        self, job_id: str, reservation_id: str, amount_nusd: int, *, closing: bool = False
    ) -> bool:
        with self._lock:
            job = self._job(job_id)
            if job.budget.cap_nusd is None or reservation_id in job.reservations:
                return True
            if not admits(job.budget, amount_nusd, closing=closing):
                if not closing:
                    job.budget = job.budget.model_copy(update={"exhausted": True})
                return False
            job.reservations[reservation_id] = amount_nusd
            reserved = job.budget.reserved_nusd + amount_nusd
            job.budget = job.budget.model_copy(update={"reserved_nusd": reserved})
            return True

    def release(self, job_id: str, reservation_id: str) -> None:
        with self._lock:
            job = self._job(job_id)
            amount = job.reservations.pop(reservation_id, None)
            if amount is not None:
                reserved = job.budget.reserved_nusd - amount
                job.budget = job.budget.model_copy(update={"reserved_nusd": reserved})

    def budget(self, job_id: str) -> BudgetState:
        with self._lock:
            return self._job(job_id).budget

    def claim(self, job_id: str, slot: str, owner: str, ttl_s: float) -> bool:
        with self._lock:
            leases = self._job(job_id).leases
            now = time.monotonic()
            held = leases.get(CLAIM + slot)
            if held is not None and held[1] > now and held[0] != owner:
                return False
            leases[CLAIM + slot] = (owner, now + ttl_s)
            return True

    def unclaim(self, job_id: str, slot: str, owner: str) -> None:
        self.release_lease(Lease(job_id, CLAIM + slot, owner))

    @staticmethod
    def _holds(job: _Job, lease: Lease) -> bool:
        held = job.leases.get(lease.name)
        return held is not None and held[0] == lease.token and held[1] > time.monotonic()

    def take_task_lease(self, lease: Lease, ttl_s: float, signature: str) -> None:
        with self._lock:
            job = self._job(lease.job_id)
            job.leases[lease.name] = (lease.token, time.monotonic() + ttl_s)
            job.signatures[lease.name.removeprefix(TASK)] = signature

    def defer_task(self, lease: Lease, delay_s: float, signature: str) -> None:
        with self._lock:
            job = self._job(lease.job_id)
            job.signatures[lease.name.removeprefix(TASK)] = signature
            held = job.leases.get(lease.name)
            if held is None or held[0] == lease.token:
                job.leases[lease.name] = ("", time.monotonic() + delay_s)

    def hasten_deferred(self, job_id: str) -> int:
        now = time.monotonic()
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None:
                return 0
            leases = job.leases.items()
            waiting = [n for n, (token, _) in leases if n.startswith(TASK) and not token]
            for name in waiting:
                job.leases[name] = ("", now)
            return len(waiting)

    def renew_leases(self, leases: Sequence[Lease], ttl_s: float) -> set[Lease]:
        lost: set[Lease] = set()
        with self._lock:
            for lease in leases:
                job = self._jobs.get(lease.job_id)
                if job is None or not self._holds(job, lease):
                    lost.add(lease)
                    continue
                until = max(job.leases[lease.name][1], time.monotonic() + ttl_s)
                job.leases[lease.name] = (lease.token, until)
        return lost

    def release_lease(self, lease: Lease) -> None:
        with self._lock:
            job = self._jobs.get(lease.job_id)
            if job is not None and job.leases.get(lease.name, ("", 0.0))[0] == lease.token:
                del job.leases[lease.name]

    def lapsed_tasks(self, limit: int) -> list[str]:
        now = time.monotonic()
        with self._lock:
            return [
                Lease(job_id, name, held[0]).member
                for job_id, job in self._jobs.items()
                for name, held in job.leases.items()
                if name.startswith(TASK) and held[1] <= now
            ][:limit]

    def take_lapse(self, member: str) -> str | None:
        job_id, name = parse_member(member)
        with self._lock:
            job = self._jobs.get(job_id)
            held = job.leases.get(name) if job is not None else None
            if job is None or held is None or held[1] > time.monotonic():
                return None
            del job.leases[name]
            return job.signatures.get(name.removeprefix(TASK))

    def held_tasks(self, job_id: str, task_ids: Sequence[str]) -> set[str]:
        with self._lock:
            job = self._jobs.get(job_id)
            leases = job.leases if job is not None else {}
            return {task_id for task_id in task_ids if TASK + task_id in leases}

    def relist_lapse(self, member: str) -> None:
        job_id, name = parse_member(member)
        with self._lock:
            job = self._jobs.get(job_id)
            if job is not None:
                job.leases.setdefault(name, ("", time.monotonic()))

    def reopen(self, spec: JobSpec) -> int:
        with self._lock:
            job = self._job(spec.job_id)
            job.spec, job.report, job.cancelled, job.phase = spec, None, False, None
            job.reservations.clear()
            cap = None if spec.budget_usd is None else nusd_of_usd(spec.budget_usd)
            job.budget = BudgetState(cap_nusd=cap, spent_nusd=job.budget.spent_nusd)
            job.resumes += 1
            return job.resumes

    def take_hedge(self, job_id: str, cap: int) -> bool:
        with self._lock:
            job = self._job(job_id)
            if job.hedges.sent >= cap:
                return False
            job.hedges = job.hedges.model_copy(update={"sent": job.hedges.sent + 1})
            return True

    def hedge_won(self, job_id: str) -> None:
        with self._lock:
            job = self._job(job_id)
            job.hedges = job.hedges.model_copy(update={"won": job.hedges.won + 1})

    def hedges(self, job_id: str) -> HedgeCounts:
        with self._lock:
            return self._job(job_id).hedges

    def count_rate_limited(self, job_id: str, model: str) -> None:
        with self._lock:
            counts = self._job(job_id).rate_limited
            counts[model] = counts.get(model, 0) + 1

    def rate_limited(self, job_id: str) -> dict[str, int]:
        with self._lock:
            return dict(sorted(self._job(job_id).rate_limited.items()))

    def count_retry(self, job_id: str, model: str) -> None:
        with self._lock:
            counts = self._job(job_id).retries
            counts[model] = counts.get(model, 0) + 1

    def retries(self, job_id: str) -> dict[str, int]:
        with self._lock:
            return dict(sorted(self._job(job_id).retries.items()))

    def save_tool_result(self, job_id: str, key: str, outcome: ToolOutcome) -> ToolOutcome:
        with self._lock:
            return self._job(job_id).tool_results.setdefault(key, outcome)

    def tool_result(self, job_id: str, key: str) -> ToolOutcome | None:
        with self._lock:
            return self._job(job_id).tool_results.get(key)

    def save_transcript(self, job_id: str, transcript: Transcript) -> None:
        with self._lock:
            self._job(job_id).transcripts[transcript.node_id] = transcript

    def transcript(self, job_id: str, node_id: str) -> Transcript | None:
        with self._lock:
            return self._job(job_id).transcripts.get(node_id)
