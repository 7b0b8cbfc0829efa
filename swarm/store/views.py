"""What the job store's reads return: node states and progress, listed jobs, a batch of
nodes to run, hedge counts (the store's twins, swarm.store.redis and swarm.store.memory,
build the same records)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from swarm.records import ErrorKind, Frozen, NodeEnvelope

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
