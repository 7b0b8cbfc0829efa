"""What every concern of a job store shares: the Redis client, key names and the job's
spec for the Redis store; the jobs and their lock for the in-memory twin.

Each concern (swarm.store.specs, nodes, ledger, claims, reports, counters, transcripts)
holds its part of the ``JobStore`` interface beside its Redis part (a ``RedisCore``
mixin) and its memory part (a ``MemoryCore`` mixin); swarm.store.redis and
swarm.store.memory compose the parts into the two stores. A part calls only its own
concern's methods and the core's (what spans concerns is swarm.store.base's).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import redis

from swarm.errors import JobNotFoundError
from swarm.records import JobSpec, NodeEnvelope
from swarm.store.agents import ToolOutcome, Transcript
from swarm.store.billing import BudgetState, LedgerLine, StoredAnswer
from swarm.store.companion import Companion
from swarm.store.durable import Durable
from swarm.store.leases import Lease
from swarm.store.script_args import STORE_SCRIPTS
from swarm.store.scripts import Scripts
from swarm.store.spec_cache import SpecCache
from swarm.store.views import HedgeCounts


def job_key(job_id: str, part: str) -> str:
    """A key of ``job_id`` (every key of a job shares its hash tag: one Cluster slot)."""
    return f"swarm:{{job:{job_id}}}:{part}"


def fence_key(job_id: str, fence: Lease | None) -> str:
    """The key a script checks a fencing token against (a placeholder of the same job
    when there is no fence: every key of a script carries the job's hash tag)."""
    return job_key(job_id, fence.name if fence is not None else "nofence")


def fence_token(fence: Lease | None) -> str:
    """The token a script checks (``""``: the run holds no lease)."""
    return fence.token if fence is not None else ""


def raised(replies: list[Any]) -> list[Any]:
    """``replies`` of a pipeline run with ``raise_on_error=False``; the first error raised."""
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply
    return replies


def ms(seconds: float) -> int:
    """``seconds`` as whole milliseconds, at least 1 (a Redis PX or lease lifetime)."""
    return max(int(seconds * 1000), 1)


class RedisCore:
    """A job store's state on one redis-py client (thread-safe connection pool)."""

    def __init__(
        self, client: redis.Redis, ttl_s: int, wait_ms: int = 0, outage_s: float = 0.0
    ) -> None:
        self._r = client
        self._ttl_s = ttl_s
        self._scripts = Scripts(client, *STORE_SCRIPTS)
        self._durable = Durable(client, wait_ms, outage_s)
        """The writes that must survive a failover (swarm.store.durable; docs/ha.md)."""
        self._specs = SpecCache()
        self._spec_misses = threading.Lock()

    def spec(self, job_id: str) -> JobSpec:
        """The process's parsed spec while the job's revision key names it (one small GET),
        else read and parsed."""
        found = self._r.get(job_key(job_id, "rev"))
        revision = str(found) if found is not None else None
        cached = self._specs.get(job_id, revision)
        if cached is not None:
            return cached
        # One thread reads and parses; the node threads that start the same job with it
        # wait and take its copy instead of each parsing one (and holding a copy each).
        with self._spec_misses:
            cached = self._specs.get(job_id, revision)
            if cached is not None:
                return cached
            raw = self._r.get(job_key(job_id, "spec"))
            if raw is None:
                raise JobNotFoundError(f"no job {job_id!r} (never submitted, or expired)")
            return self._specs.put(job_id, str(raw), revision)

    def _write_with(self, build: Callable[[Any], object], companion: Companion | None) -> list[Any]:
        """The replies of the commands ``build`` adds (an error is its reply), written durably
        with ``companion``'s command (swarm.store.companion) in the same round trip when it
        can go in it, else run alone after."""
        queued = False

        def write(pipe: Any) -> None:
            nonlocal queued
            build(pipe)
            queued = companion is not None and companion.queue(pipe)

        replies = self._durable.write(write, raise_on_error=False)
        if companion is not None:
            companion.take(replies.pop()) if queued else companion.run()
        return replies

    def _hset(self, job_id: str, part: str, mapping: dict[Any, Any]) -> None:
        """HSET fields of a job's hash and renew its expiry, in one round trip."""
        name = job_key(job_id, part)
        pipe = self._r.pipeline(transaction=False)
        pipe.hset(name, mapping=mapping)
        pipe.expire(name, self._ttl_s)
        pipe.execute()

    def _hincr(self, job_id: str, part: str, field_: str) -> int:
        """HINCRBY a job's hash field by one and renew its expiry: the new count."""
        name = job_key(job_id, part)
        pipe = self._r.pipeline(transaction=False)
        pipe.hincrby(name, field_, 1)
        pipe.expire(name, self._ttl_s)
        count, _ = pipe.execute()
        return int(count)


@dataclass
class Job:
    """One job of the in-memory store."""

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
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    """counts by name (swarm.store.counters: 429s, retries) -> model -> count"""
    tool_results: dict[str, ToolOutcome] = field(default_factory=dict)
    transcripts: dict[str, Transcript] = field(default_factory=dict)
    phase: str | None = None
    sent: int | None = None

    def holds(self, lease: Lease) -> bool:
        """True while ``lease`` is held with its token and has not lapsed."""
        held = self.leases.get(lease.name)
        return held is not None and held[0] == lease.token and held[1] > time.monotonic()


class MemoryCore:
    """Dictionaries behind one lock (thread-safe, not shared between processes)."""

    def __init__(self) -> None:
        self._jobs: dict[str, Job] = {}
        self._lock = threading.Lock()

    def _job(self, job_id: str) -> Job:
        try:
            return self._jobs[job_id]
        except KeyError:
            raise JobNotFoundError(f"no job {job_id!r}") from None

    def spec(self, job_id: str) -> JobSpec:
        with self._lock:
            return self._job(job_id).spec
