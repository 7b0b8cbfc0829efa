"""The job store interface: every concern's part in one class, what spans concerns, and
the records it returns.

Each concern's part lives beside its Redis and in-memory implementations (swarm.store.specs,
nodes, ledger, claims, reports, counters, transcripts); RedisJobStore and MemoryJobStore
compose them. The two methods here read or write across concerns, from the other methods;
RedisJobStore does each in one round trip (swarm.store.nodes, swarm.store.ledger).
"""

from __future__ import annotations

from collections.abc import Sequence

from swarm.records import NodeEnvelope
from swarm.store.billing import HeldAnswer, LedgerLine
from swarm.store.claims import ClaimStore
from swarm.store.counters import CounterStore
from swarm.store.leases import Lease
from swarm.store.ledger import LedgerStore
from swarm.store.nodes import NodeStore
from swarm.store.reports import ReportStore
from swarm.store.specs import SpecStore
from swarm.store.transcripts import AgentStore
from swarm.store.views import HedgeCounts, JobSummary, ModelProgress, NodeBatch, Progress

__all__ = [
    "HedgeCounts",
    "JobStore",
    "JobSummary",
    "LedgerLine",
    "ModelProgress",
    "NodeBatch",
    "Progress",
]


class JobStore(
    SpecStore, NodeStore, LedgerStore, ClaimStore, ReportStore, CounterStore, AgentStore
):
    """Everything about a job that producers, workers and `swarm status` share."""

    def load_nodes(self, job_id: str, node_ids: Sequence[str]) -> NodeBatch:
        """Stored envelopes, inputs and the cancel flag of several nodes at once."""
        return NodeBatch(
            envelopes=self.envelopes_of(job_id, node_ids),
            texts={n: self.input_text(job_id, n) for n in node_ids},
            cancelled=self.cancelled(job_id),
        )

    def finish_billed_node(
        self, job_id: str, envelope: NodeEnvelope, fence: Lease | None, held: HeldAnswer
    ) -> bool:
        """``record_call`` of the held answer under its claim, then ``finish_node``: the
        billed call is counted whether or not the envelope is stored (RedisJobStore does
        both in one script, with ``held.companion`` in its round trip)."""
        self.record_call(job_id, held.call, fence=held.claim)
        stored = self.finish_node(job_id, envelope, fence)
        if held.companion is not None:
            held.companion.run()
        return stored
