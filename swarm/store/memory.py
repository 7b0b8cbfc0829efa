"""In-process job store for the embedded mode and unit tests (thread-safe, not shared)."""

from __future__ import annotations

import copy
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from swarm.errors import JobNotFoundError
from swarm.records import JobSpec, NodeEnvelope, Usage
from swarm.store.base import (
    ERROR,
    OK,
    RUNNING,
    JobStore,
    LedgerLine,
    Progress,
    progress_from_states,
    should_replace,
)


@dataclass
class _Job:
    spec: JobSpec
    texts: dict[str, str]
    states: dict[str, str] = field(default_factory=dict)
    envelopes: dict[str, NodeEnvelope] = field(default_factory=dict)
    ledger: dict[str, LedgerLine] = field(default_factory=dict)
    cancelled: bool = False
    report: dict[str, Any] | None = None


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

    def create_job(self, spec: JobSpec, texts: Sequence[str]) -> None:
        with self._lock:
            self._jobs[spec.job_id] = _Job(spec, dict(zip(spec.node_ids, texts, strict=True)))

    def spec(self, job_id: str) -> JobSpec:
        with self._lock:
            return self._job(job_id).spec

    def input_text(self, job_id: str, node_id: str) -> str:
        with self._lock:
            return self._job(job_id).texts[node_id]

    def mark_running(self, job_id: str, node_id: str, model: str) -> None:
        with self._lock:
            self._job(job_id).states[node_id] = f"{RUNNING}|{model}"

    def finish_node(self, job_id: str, envelope: NodeEnvelope) -> bool:
        with self._lock:
            job = self._job(job_id)
            if not should_replace(job.envelopes.get(envelope.node_id)):
                return False
            job.envelopes[envelope.node_id] = envelope
            state = OK if envelope.ok else ERROR
            job.states[envelope.node_id] = f"{state}|{envelope.model}"
            return True

    def envelope(self, job_id: str, node_id: str) -> NodeEnvelope | None:
        with self._lock:
            return self._job(job_id).envelopes.get(node_id)

    def envelopes(self, job_id: str) -> list[NodeEnvelope]:
        with self._lock:
            job = self._job(job_id)
            return [job.envelopes[n] for n in job.spec.node_ids if n in job.envelopes]

    def add_usage(self, job_id: str, model: str, usage: Usage) -> None:
        with self._lock:
            ledger = self._job(job_id).ledger
            line = ledger.get(model, LedgerLine())
            ledger[model] = LedgerLine(calls=line.calls + 1, usage=line.usage + usage)

    def ledger(self, job_id: str) -> dict[str, LedgerLine]:
        with self._lock:
            return dict(self._job(job_id).ledger)

    def progress(self, job_id: str) -> Progress:
        with self._lock:
            job = self._job(job_id)
            return progress_from_states(len(job.spec.node_ids), job.states, job.report is not None)

    def cancel(self, job_id: str) -> None:
        with self._lock:
            self._job(job_id).cancelled = True

    def cancelled(self, job_id: str) -> bool:
        with self._lock:
            return self._job(job_id).cancelled

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
