"""A job as submitted and where it stands: its spec and inputs, cancel flag, phase,
progress, the index of jobs by submit time, and reopening it for a resume."""

from __future__ import annotations

import json
import time
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from swarm.cost.pricing import nusd_of_usd, usd_of_nusd
from swarm.errors import JobNotFoundError
from swarm.records import JobSpec
from swarm.store.billing import BudgetState
from swarm.store.core import Job, MemoryCore, RedisCore, job_key
from swarm.store.report_pages import CHUNK, chunks
from swarm.store.script_args import CountStatesArgs, ReopenArgs
from swarm.store.spec_cache import spec_revision
from swarm.store.views import (
    JobSummary,
    Progress,
    progress_from_counts,
    summary_status,
)

JOB_INDEX = "swarm:{jobs}:submitted"
"""The index of jobs by submit time (recent_jobs)."""
_SUMMARY_PARTS = ("spec", "state", "report", "outcome", "cancel", "budget", "phase")
"""The keys recent_jobs reads of each job, in this order."""


class SpecStore(ABC):
    """The spec and status part of the JobStore interface."""

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
    def reopen(self, spec: JobSpec) -> int:
        """Make a finished job resumable: store ``spec`` (its budget may differ), delete the
        report and cancel flag, clear the budget's exhaustion and stale reservations and set
        the cap from ``spec``; returns the resume's number (1, 2, ...)."""


def _state_counts(flat: Sequence[Any]) -> dict[str, int]:
    """count_states.lua's reply (value, count, value, count, ...) as a mapping."""
    return {str(flat[i]): int(flat[i + 1]) for i in range(0, len(flat), 2)}


class RedisSpecs(RedisCore, SpecStore):
    """SpecStore on Redis."""

    def create_job(self, spec: JobSpec, texts: Iterable[str], *, chunk: int = CHUNK) -> None:
        """The inputs ``chunk`` at a time as ``texts`` yields them (one HSET and round trip
        per chunk, the key's expiry with each: a submit stopped half way leaves nothing
        for good), then the spec, its revision, the budget's cap and the job's place in
        the index of jobs, durable (WAIT: a job lost in a failover would have its tasks
        find nothing; the WAIT covers the chunks written before it)."""
        for part in chunks(zip(spec.node_ids, texts, strict=True), chunk):
            self._hset(spec.job_id, "inputs", dict(part))
        inputs = job_key(spec.job_id, "inputs")

        def write(pipe: Any) -> None:
            pipe.expire(inputs, self._ttl_s)
            spec_json = spec.to_json()
            pipe.set(job_key(spec.job_id, "spec"), spec_json, ex=self._ttl_s)
            pipe.set(job_key(spec.job_id, "rev"), spec_revision(spec_json), ex=self._ttl_s)
            if spec.budget_usd is not None:
                budget = job_key(spec.job_id, "budget")
                pipe.hset(budget, "cap_nusd", nusd_of_usd(spec.budget_usd))
                pipe.expire(budget, self._ttl_s)
            pipe.zadd(JOB_INDEX, {spec.job_id: spec.submitted_at})
            pipe.zremrangebyscore(JOB_INDEX, "-inf", f"({time.time() - self._ttl_s}")
            pipe.expire(JOB_INDEX, self._ttl_s)

        self._durable.write(write)

    def update_job(self, spec: JobSpec, texts: Iterable[str]) -> None:
        self.create_job(spec, texts)  # only sets the spec, adds inputs and (re)sets the cap

    def input_text(self, job_id: str, node_id: str) -> str:
        text = self._r.hget(job_key(job_id, "inputs"), node_id)
        if text is None:
            raise JobNotFoundError(f"no input {node_id!r} in job {job_id!r}")
        return str(text)

    def note_sent(self, job_id: str, nodes: int | None) -> None:
        if nodes is None:
            self._r.delete(job_key(job_id, "sent"))
        else:
            self._r.set(job_key(job_id, "sent"), nodes, ex=self._ttl_s)

    def progress(self, job_id: str) -> Progress:
        """One round trip; the node states are counted by the server (count_states.lua):
        what comes back is a few counts, whatever the job's size."""
        spec = self.spec(job_id)
        pipe = self._r.pipeline(transaction=False)
        self._count_states(job_id, pipe)
        pipe.exists(job_key(job_id, "report"))
        pipe.get(job_key(job_id, "phase"))
        pipe.get(job_key(job_id, "sent"))
        counts, finished, phase, sent = pipe.execute()
        total = len(spec.node_ids)
        return progress_from_counts(
            total, _state_counts(counts), bool(finished), phase, None if sent is None else int(sent)
        )

    def _count_states(self, job_id: str, pipe: Any) -> None:
        """Queue the server-side count of ``job_id``'s node states on ``pipe``."""
        self._scripts.run(CountStatesArgs(job_key(job_id, "state")), client=pipe)

    def cancel(self, job_id: str) -> None:
        self.spec(job_id)
        self._r.set(job_key(job_id, "cancel"), "1", ex=self._ttl_s)

    def cancelled(self, job_id: str) -> bool:
        return bool(self._r.exists(job_key(job_id, "cancel")))

    def recent_jobs(self, limit: int) -> list[JobSummary]:
        """Two round trips: the index, then the few keys of each listed job (the report
        itself only for a job whose status was not recorded beside it)."""
        if limit <= 0:
            return []
        listed = [str(job_id) for job_id in self._r.zrevrange(JOB_INDEX, 0, limit - 1)]
        pipe = self._r.pipeline(transaction=False)
        for job_id in listed:
            pipe.get(job_key(job_id, "spec"))
            self._count_states(job_id, pipe)
            pipe.exists(job_key(job_id, "report"))
            pipe.get(job_key(job_id, "outcome"))
            pipe.exists(job_key(job_id, "cancel"))
            pipe.hget(job_key(job_id, "budget"), "spent_nusd")
            pipe.get(job_key(job_id, "phase"))
        found = pipe.execute()
        width = len(_SUMMARY_PARTS)
        rows = (found[i * width : (i + 1) * width] for i in range(len(listed)))
        summaries = (self._summary(job_id, row) for job_id, row in zip(listed, rows, strict=True))
        return [summary for summary in summaries if summary is not None]

    def _summary(self, job_id: str, row: Sequence[Any]) -> JobSummary | None:
        raw_spec, counts, finished, outcome, cancelled, spent, phase = row
        if raw_spec is None:
            return None  # expired (the index is trimmed at the next submit)
        spec = JobSpec.model_validate_json(raw_spec)
        if finished and outcome is None:  # a report stored before its status was kept beside it
            raw = self._r.get(job_key(job_id, "report"))
            outcome = str(json.loads(raw).get("status")) if raw else None
        progress = progress_from_counts(len(spec.node_ids), _state_counts(counts), bool(finished))
        status = summary_status(outcome if finished else None, bool(cancelled))
        return _listed(spec, status, progress, int(spent or 0), None if finished else phase)

    def set_phase(self, job_id: str, phase: str) -> None:
        self._r.set(job_key(job_id, "phase"), phase, ex=self._ttl_s)

    def reopen(self, spec: JobSpec) -> int:
        self.spec(spec.job_id)
        job = spec.job_id
        cap = "" if spec.budget_usd is None else nusd_of_usd(spec.budget_usd)
        spec_json = spec.to_json()
        args = ReopenArgs(
            report=job_key(job, "report"),
            cancel=job_key(job, "cancel"),
            budget=job_key(job, "budget"),
            resumes=job_key(job, "resumes"),
            spec=job_key(job, "spec"),
            revision=job_key(job, "rev"),
            cap_nusd=cap,
            spec_json=spec_json,
            spec_rev=spec_revision(spec_json),
            ttl_s=self._ttl_s,
        )
        number = int(self._scripts.run(args))
        self._r.delete(job_key(job, "phase"))  # the new run's aggregation sets its own
        return number


def _listed(
    spec: JobSpec, status: str, progress: Progress, spent_nusd: int, phase: str | None
) -> JobSummary:
    """A job's line in ``swarm jobs``."""
    counts = progress.model_dump(include={"total", "done", "failed", "in_flight", "cancelled"})
    return JobSummary(
        job_id=spec.job_id,
        submitted_at=spec.submitted_at,
        status=status,
        cost_usd=usd_of_nusd(spent_nusd),
        phase=phase,
        **counts,
    )


class MemorySpecs(MemoryCore, SpecStore):
    """SpecStore in process."""

    def create_job(self, spec: JobSpec, texts: Iterable[str], *, chunk: int = CHUNK) -> None:
        with self._lock:
            job = Job(spec, dict(zip(spec.node_ids, texts, strict=True)))
            if spec.budget_usd is not None:
                job.budget = BudgetState(cap_nusd=nusd_of_usd(spec.budget_usd))
            self._jobs[spec.job_id] = job

    def update_job(self, spec: JobSpec, texts: Iterable[str]) -> None:
        with self._lock:
            job = self._job(spec.job_id)
            job.spec = spec
            job.texts.update(zip(spec.node_ids, texts, strict=True))

    def input_text(self, job_id: str, node_id: str) -> str:
        with self._lock:
            return self._job(job_id).texts[node_id]

    def note_sent(self, job_id: str, nodes: int | None) -> None:
        with self._lock:
            self._job(job_id).sent = nodes

    def progress(self, job_id: str) -> Progress:
        with self._lock:
            job = self._job(job_id)
            total, finished = len(job.spec.node_ids), job.report is not None
            return progress_from_counts(total, _counted(job), finished, job.phase, job.sent)

    def cancel(self, job_id: str) -> None:
        with self._lock:
            self._job(job_id).cancelled = True

    def cancelled(self, job_id: str) -> bool:
        with self._lock:
            return self._job(job_id).cancelled

    def recent_jobs(self, limit: int) -> list[JobSummary]:
        with self._lock:
            jobs = sorted(self._jobs.values(), key=lambda j: j.spec.submitted_at, reverse=True)
            return [_memory_summary(job) for job in jobs[: max(limit, 0)]]

    def set_phase(self, job_id: str, phase: str) -> None:
        with self._lock:
            self._job(job_id).phase = phase

    def reopen(self, spec: JobSpec) -> int:
        with self._lock:
            job = self._job(spec.job_id)
            job.spec, job.report, job.cancelled, job.phase = spec, None, False, None
            job.reservations.clear()
            cap = None if spec.budget_usd is None else nusd_of_usd(spec.budget_usd)
            job.budget = BudgetState(cap_nusd=cap, spent_nusd=job.budget.spent_nusd)
            job.resumes += 1
            return job.resumes


def _memory_summary(job: Job) -> JobSummary:
    report_status = None if job.report is None else str(job.report.get("status"))
    progress = progress_from_counts(len(job.spec.node_ids), _counted(job), False)
    status = summary_status(report_status, job.cancelled)
    phase = None if job.report is not None else job.phase
    return _listed(job.spec, status, progress, job.budget.spent_nusd, phase)


def _counted(job: Job) -> Counter[str]:
    """How many of the job's nodes hold each state value (as count_states.lua counts)."""
    return Counter(job.states.values())
