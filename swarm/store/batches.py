"""Where a job's batch files stand: one record per file, in the job store's Redis.

    swarm:{job:<id>}:batches   hash   file index -> FileState JSON

The producer stores each file's plan (HSETNX: a plan already stored is kept); the poll task
replaces its file's record after each step, the batch id first of all, right after the
batch is created and before the poll's message is acknowledged. ``beats`` counts polls
over all files: the watchdog's fingerprint includes it, so a job whose batches are
being polled is never taken for stalled.
"""

from __future__ import annotations

import threading
import weakref
from abc import ABC, abstractmethod
from collections.abc import Sequence

import redis

from swarm.records import Frozen
from swarm.store.base import JobStore
from swarm.store.core import job_key

STATE_TTL_S = 8 * 24 * 3600
"""How long a job's batch records are kept after their last write (a batch window is 24 h)."""


class FileState(Frozen):
    """One batch file of a job."""

    index: int
    """Position of the file in the job (its ``swarm_file`` metadata)."""
    model: str
    """Catalog model of every line."""
    node_ids: tuple[str, ...]
    """Nodes of the file, in job order."""
    batch_id: str | None = None
    """The gateway's batch id, once created (or found by its metadata)."""
    status: str = "planned"
    """``planned``, the gateway's batch status, or ``live`` (its nodes ran live)."""
    total: int = 0
    """The batch's request_counts."""
    completed: int = 0
    failed: int = 0
    ingested: bool = False
    """True once its output and error files were recorded."""
    live_nodes: int = 0
    """Nodes of the file that ran live (failed lines, the deadline, no batch)."""
    polls: int = 0
    """Poll steps run for this file."""
    error: str | None = None
    """Why the batch could not be used (one line), when it could not."""
    ended: bool = False
    """True once every node of the file has its envelope."""


class BatchStore(ABC):
    """The batch records of jobs."""

    @abstractmethod
    def plan(self, job_id: str, files: Sequence[FileState]) -> None:
        """Store each file's first record unless one is stored."""

    @abstractmethod
    def get(self, job_id: str, index: int) -> FileState | None:
        """A file's record."""

    @abstractmethod
    def put(self, job_id: str, state: FileState) -> None:
        """Replace a file's record."""

    @abstractmethod
    def files(self, job_id: str) -> list[FileState]:
        """Every file of the job, by index (none: the job has no batch)."""

    def beats(self, job_id: str) -> int:
        """Polls over all the job's files."""
        return sum(state.polls for state in self.files(job_id))


class RedisBatchStore(BatchStore):
    """Batch records in Redis (decode_responses clients)."""

    def __init__(self, client: redis.Redis) -> None:
        self._r = client

    def plan(self, job_id: str, files: Sequence[FileState]) -> None:
        key = job_key(job_id, "batches")
        pipe = self._r.pipeline(transaction=False)
        for state in files:
            pipe.hsetnx(key, str(state.index), state.model_dump_json())
        pipe.expire(key, STATE_TTL_S)
        pipe.execute()

    def get(self, job_id: str, index: int) -> FileState | None:
        raw = self._r.hget(job_key(job_id, "batches"), str(index))
        return None if raw is None else FileState.model_validate_json(raw)

    def put(self, job_id: str, state: FileState) -> None:
        key = job_key(job_id, "batches")
        pipe = self._r.pipeline(transaction=False)
        pipe.hset(key, str(state.index), state.model_dump_json())
        pipe.expire(key, STATE_TTL_S)
        pipe.execute()

    def files(self, job_id: str) -> list[FileState]:
        raw = self._r.hgetall(job_key(job_id, "batches"))
        states = [FileState.model_validate_json(v) for v in raw.values()]
        return sorted(states, key=lambda s: s.index)


class MemoryBatchStore(BatchStore):
    """Batch records in a dictionary (the embedded mode, unit tests)."""

    def __init__(self) -> None:
        self._files: dict[str, dict[int, FileState]] = {}
        self._lock = threading.Lock()

    def plan(self, job_id: str, files: Sequence[FileState]) -> None:
        with self._lock:
            job = self._files.setdefault(job_id, {})
            for state in files:
                job.setdefault(state.index, state)

    def get(self, job_id: str, index: int) -> FileState | None:
        with self._lock:
            return self._files.get(job_id, {}).get(index)

    def put(self, job_id: str, state: FileState) -> None:
        with self._lock:
            self._files.setdefault(job_id, {})[state.index] = state

    def files(self, job_id: str) -> list[FileState]:
        with self._lock:
            return [s for _, s in sorted(self._files.get(job_id, {}).items())]


_MEMORY: weakref.WeakKeyDictionary[JobStore, MemoryBatchStore] = weakref.WeakKeyDictionary()
_MEMORY_LOCK = threading.Lock()


def batch_store(store: JobStore) -> BatchStore:
    """The batch records next to ``store``: in its Redis, or (a store without Redis, the
    embedded mode's) in memory for as long as that store lives."""
    client = getattr(store, "redis", None)
    if isinstance(client, redis.Redis):
        return RedisBatchStore(client)
    with _MEMORY_LOCK:
        found = _MEMORY.get(store)
        if found is None:
            found = _MEMORY[store] = MemoryBatchStore()
        return found
