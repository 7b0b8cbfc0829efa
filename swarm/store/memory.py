"""In-process job store for the embedded mode and unit tests (thread-safe, not shared):
each concern's in-memory part (swarm.store.specs, nodes, ledger, claims, reports, counters,
transcripts) over one lock and one dictionary of jobs (swarm.store.core.MemoryCore)."""

from __future__ import annotations

from swarm.store import claims, counters, ledger, nodes, reports, specs, transcripts
from swarm.store.base import JobStore


class MemoryJobStore(
    specs.MemorySpecs,
    nodes.MemoryNodes,
    ledger.MemoryLedger,
    claims.MemoryClaims,
    reports.MemoryReports,
    counters.MemoryCounters,
    transcripts.MemoryAgents,
    JobStore,
):
    """Dictionaries behind one lock."""
