"""A job's nodes as they run and end: their states and their stored envelopes."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

from swarm.errors import JobNotFoundError
from swarm.records import NodeEnvelope
from swarm.store.core import MemoryCore, RedisCore, fence_key, fence_token, job_key
from swarm.store.leases import Lease
from swarm.store.script_args import FinishNodeArgs, NodeKeys, NodeWrite
from swarm.store.views import RUNNING, NodeBatch, state_of


class NodeStore(ABC):
    """The node part of the JobStore interface."""

    @abstractmethod
    def mark_running_many(self, job_id: str, models: Mapping[str, str]) -> None:
        """Record that nodes started (node id -> model, for progress)."""

    @abstractmethod
    def finish_node(self, job_id: str, envelope: NodeEnvelope, fence: Lease | None = None) -> bool:
        """Store a node's envelope unless an ok one is stored already, or the run lost
        ``fence`` (its lease: another run took the node over); True when stored."""

    @abstractmethod
    def envelope(self, job_id: str, node_id: str) -> NodeEnvelope | None:
        """A node's stored envelope, if any."""

    @abstractmethod
    def envelopes(self, job_id: str) -> list[NodeEnvelope]:
        """All stored envelopes in node order."""

    # -- defaults built from the methods above (RedisJobStore pipelines the reads) --
    def envelopes_of(self, job_id: str, node_ids: Sequence[str]) -> dict[str, NodeEnvelope]:
        """The stored envelopes of ``node_ids`` (node id -> envelope; none for a node that
        has not ended)."""
        found = {n: self.envelope(job_id, n) for n in node_ids}
        return {n: env for n, env in found.items() if env is not None}

    def not_ended(self, job_id: str, node_ids: Sequence[str]) -> list[str]:
        """Those of ``node_ids`` that have no envelope, in their order (a page of the
        job's nodes: what is read and held grows with ``node_ids``, not with the job)."""
        found = self.envelopes_of(job_id, node_ids)
        return [n for n in node_ids if n not in found]

    def mark_running(self, job_id: str, node_id: str, model: str) -> None:
        """Record that a node started (for progress)."""
        self.mark_running_many(job_id, {node_id: model})


def node_keys(job_id: str, fence: Lease | None) -> NodeKeys:
    """The keys finish.lua and finish_billed.lua store a node's envelope under."""
    return NodeKeys(job_key(job_id, "env"), job_key(job_id, "state"), fence_key(job_id, fence))


def node_write(envelope: NodeEnvelope, fence: Lease | None, ttl_s: int) -> NodeWrite:
    """The script arguments that store ``envelope`` (finish.lua and finish_billed.lua)."""
    return NodeWrite(
        node_id=envelope.node_id,
        envelope=envelope.model_dump_json(),
        state=state_of(envelope),
        ttl_s=ttl_s,
        fence_token=fence_token(fence),
    )


class RedisNodes(RedisCore, NodeStore):
    """NodeStore on Redis."""

    def mark_running_many(self, job_id: str, models: Mapping[str, str]) -> None:
        if models:
            self._hset(job_id, "state", {n: f"{RUNNING}|{model}" for n, model in models.items()})

    def finish_node(self, job_id: str, envelope: NodeEnvelope, fence: Lease | None = None) -> bool:
        args = FinishNodeArgs(node_keys(job_id, fence), node_write(envelope, fence, self._ttl_s))
        return int(self._scripts.run(args)) == 1

    def envelope(self, job_id: str, node_id: str) -> NodeEnvelope | None:
        raw = self._r.hget(job_key(job_id, "env"), node_id)
        return NodeEnvelope.model_validate_json(raw) if raw else None

    def envelopes(self, job_id: str) -> list[NodeEnvelope]:
        spec = self.spec(job_id)
        raw = self._r.hgetall(job_key(job_id, "env"))
        return [NodeEnvelope.model_validate_json(raw[n]) for n in spec.node_ids if n in raw]

    def load_nodes(self, job_id: str, node_ids: Sequence[str]) -> NodeBatch:
        """One round trip: envelopes, inputs and the cancel flag."""
        pipe = self._r.pipeline(transaction=False)
        pipe.hmget(job_key(job_id, "env"), list(node_ids))
        pipe.hmget(job_key(job_id, "inputs"), list(node_ids))
        pipe.exists(job_key(job_id, "cancel"))
        envelopes, texts, cancelled = pipe.execute()
        missing = [n for n, text in zip(node_ids, texts, strict=True) if text is None]
        if missing:
            raise JobNotFoundError(f"no input {missing[0]!r} in job {job_id!r}")
        return NodeBatch(
            envelopes=_parsed(node_ids, envelopes),
            texts=dict(zip(node_ids, texts, strict=True)),
            cancelled=bool(cancelled),
        )

    def envelopes_of(self, job_id: str, node_ids: Sequence[str]) -> dict[str, NodeEnvelope]:
        """One HMGET."""
        if not node_ids:
            return {}
        return _parsed(node_ids, self._r.hmget(job_key(job_id, "env"), list(node_ids)))

    def not_ended(self, job_id: str, node_ids: Sequence[str]) -> list[str]:
        """One HEXISTS per node, pipelined (one round trip): no envelope is read."""
        if not node_ids:
            return []
        name = job_key(job_id, "env")
        pipe = self._r.pipeline(transaction=False)
        for node_id in node_ids:
            pipe.hexists(name, node_id)
        return [n for n, found in zip(node_ids, pipe.execute(), strict=True) if not found]


def _parsed(node_ids: Sequence[str], raw: Sequence[Any]) -> dict[str, NodeEnvelope]:
    """The envelopes an HMGET of ``node_ids`` found."""
    return {
        n: NodeEnvelope.model_validate_json(found)
        for n, found in zip(node_ids, raw, strict=True)
        if found
    }


class MemoryNodes(MemoryCore, NodeStore):
    """NodeStore in process."""

    def mark_running_many(self, job_id: str, models: Mapping[str, str]) -> None:
        with self._lock:
            states = self._job(job_id).states
            states.update((n, f"{RUNNING}|{model}") for n, model in models.items())

    def finish_node(self, job_id: str, envelope: NodeEnvelope, fence: Lease | None = None) -> bool:
        with self._lock:
            job = self._job(job_id)
            if fence is not None and not job.holds(fence):
                return False
            existing = job.envelopes.get(envelope.node_id)
            if existing is not None and existing.ok:  # final; an error may be replaced
                return False
            job.envelopes[envelope.node_id] = envelope
            job.states[envelope.node_id] = state_of(envelope)
            return True

    def envelope(self, job_id: str, node_id: str) -> NodeEnvelope | None:
        with self._lock:
            return self._job(job_id).envelopes.get(node_id)

    def envelopes(self, job_id: str) -> list[NodeEnvelope]:
        with self._lock:
            job = self._job(job_id)
            return [job.envelopes[n] for n in job.spec.node_ids if n in job.envelopes]
