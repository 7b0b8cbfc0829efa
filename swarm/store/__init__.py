"""Job stores: where job specs, inputs, node envelopes, the ledger and reports live.

``RedisJobStore`` is the real one (shared by producers and workers on any host);
``MemoryJobStore`` serves the embedded single-process mode and unit tests.
"""

from swarm.store.base import JobStore, JobSummary, LedgerLine, ModelProgress, Progress
from swarm.store.memory import MemoryJobStore
from swarm.store.redis import RedisJobStore

__all__ = [
    "JobStore",
    "JobSummary",
    "LedgerLine",
    "MemoryJobStore",
    "ModelProgress",
    "Progress",
    "RedisJobStore",
]
