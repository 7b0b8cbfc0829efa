"""Where a running job stands, read from the job store in a few round trips: node counts
(per model), the aggregation's phase, 429s, the cost so far and an ETA; and the same as one
plain line with labelled counts (piped output, `swarm status` of a running job)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from swarm.catalog import Catalog
from swarm.cost.pricing import cost_usd, usd_of_nusd, usd_text
from swarm.records import JobSpec
from swarm.store import JobStore, Progress


@dataclass(frozen=True)
class JobSnapshot:
    """One reading of a job."""

    job_id: str
    progress: Progress
    elapsed_s: float
    """Since the job was submitted."""
    cost_usd: float
    """What the gateway billed the job so far (the ledger, every call)."""
    budget_usd: float | None
    cancelled: bool
    model_cost_usd: dict[str, float] = field(default_factory=dict)
    """Cost so far per model (models of this catalog)."""
    rate_limited: dict[str, int] = field(default_factory=dict)
    """429 answers per model so far."""
    retries: dict[str, int] = field(default_factory=dict)
    """Retries per model so far (attempts after a failed one)."""

    @property
    def finished_nodes(self) -> int:
        return self.progress.ended

    @property
    def phase(self) -> str:
        """``queued (no sub-agent started yet)``, ``sub-agents running``, ``aggregation
        queued``, ``aggregating (reduce level 2 of at most 3: 4 calls)``, ``finished``;
        ``cancelling: ...`` once cancelled."""
        p = self.progress
        if p.finished:
            return "finished"
        if p.phase:
            text = "aggregating" if p.phase == "aggregating" else f"aggregating ({p.phase})"
        elif self.finished_nodes >= p.total:
            text = "aggregation queued"
        elif p.in_flight == 0 and self.finished_nodes == 0:
            text = "queued (no sub-agent started yet)"
        else:
            text = "sub-agents running"
        return f"cancelling: {text}" if self.cancelled else text

    @property
    def eta_s(self) -> float | None:
        """Seconds until the last sub-agent ends at the pace so far (None before the first
        ends, and once they all have: the aggregation's length is not known)."""
        left = self.progress.total - self.finished_nodes
        if self.finished_nodes == 0 or left <= 0 or self.progress.phase:
            return None
        return self.elapsed_s * left / self.finished_nodes

    @property
    def rate_limited_total(self) -> int:
        return sum(self.rate_limited.values())

    @property
    def retries_total(self) -> int:
        return sum(self.retries.values())


def take_snapshot(
    store: JobStore, catalog: Catalog, spec: JobSpec, now: float | None = None
) -> JobSnapshot:
    """Read the job's progress, ledger, 429s, budget and cancel flag."""
    job_id = spec.job_id
    ledger = store.ledger(job_id)
    costs = {
        name: cost_usd(catalog.models[name], line.usage)
        for name, line in ledger.items()
        if name in catalog.models
    }
    return JobSnapshot(
        job_id=job_id,
        progress=store.progress(job_id),
        elapsed_s=max((now if now is not None else time.time()) - spec.submitted_at, 0.0),
        cost_usd=usd_of_nusd(store.budget(job_id).spent_nusd),
        budget_usd=spec.budget_usd,
        cancelled=store.cancelled(job_id),
        model_cost_usd=costs,
        rate_limited=store.rate_limited(job_id),
        retries=store.retries(job_id),
    )


def clock(seconds: float) -> str:
    """``0:07``, ``12:30``, ``1:02:03`` (whole seconds, rounded up: an ETA is never 0:00)."""
    whole = math.ceil(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def counts(p: Progress) -> str:
    """``done 37 failed 0 in flight 16 pending 68`` (``cancelled N`` after ``failed`` once
    some nodes ended cancelled: they are not failures)."""
    cancelled = f" cancelled {p.cancelled}" if p.cancelled else ""
    return f"done {p.done} failed {p.failed}{cancelled} in flight {p.in_flight} pending {p.pending}"


def sub_agents(n: int) -> str:
    """``1 sub-agent``, ``3 sub-agents``."""
    return f"{n} sub-agent{'' if n == 1 else 's'}"


def plain_line(s: JobSnapshot) -> str:
    """The snapshot on one line, every count labelled, e.g. ``job 1a2b3c4d [0:12] sub-agents
    running: done 37 failed 0 in flight 16 pending 68 of 121; 429s 3 retries 5; cost so far $0.0123;
    ETA 0:30``; with several models, their counts follow (``| kimi-k2.5 done 30 ...``)."""
    parts = [
        f"job {s.job_id} [{clock(s.elapsed_s)}] {s.phase}: {counts(s.progress)} "
        f"of {s.progress.total}",
        f"429s {s.rate_limited_total} retries {s.retries_total}",
        f"cost so far {usd_text(s.cost_usd)}"
        + (f" of budget {usd_text(s.budget_usd)}" if s.budget_usd is not None else ""),
    ]
    if s.eta_s is not None:
        parts.append(f"ETA {clock(s.eta_s)}")
    line = "; ".join(parts)
    if len(s.progress.models) > 1:
        line += "".join(
            f" | {name} done {m.done} failed {m.failed}"
            + (f" cancelled {m.cancelled}" if m.cancelled else "")
            + f" in flight {m.in_flight}"
            for name, m in s.progress.models.items()
        )
    return line
