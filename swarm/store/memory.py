"""In-process job store for the embedded mode and unit tests (thread-safe, not shared):
each concern's in-memory part (swarm.store.specs, nodes, ledger, claims, reports, counters,
transcripts) over one lock and one dictionary of jobs (swarm.store.core.MemoryCore)."""

from __future__ import annotations

from swarm.store.base import JobStore
from swarm.store.claims import MemoryClaims
from swarm.store.counters import MemoryCounters
from swarm.store.ledger import MemoryLedger
from swarm.store.nodes import MemoryNodes
from swarm.store.reports import MemoryReports
from swarm.store.specs import MemorySpecs
from swarm.store.transcripts import MemoryAgents


class MemoryJobStore(
    MemorySpecs,
    MemoryNodes,
    MemoryLedger,
    MemoryClaims,
    MemoryReports,
    MemoryCounters,
    MemoryAgents,
    JobStore,
):
    """Dictionaries behind one lock."""
