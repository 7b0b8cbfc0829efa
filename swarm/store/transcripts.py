"""What an agent node keeps in the job store: its tool results (the first stored wins) and
its transcript (the records: swarm.store.agents)."""

from __future__ import annotations

from abc import ABC, abstractmethod

from swarm.store.agents import ToolOutcome, Transcript
from swarm.store.core import MemoryCore, RedisCore, job_key


class AgentStore(ABC):
    """The agent node part of the JobStore interface (swarm.jobs.agent)."""

    @abstractmethod
    def save_tool_result(self, job_id: str, key: str, outcome: ToolOutcome) -> ToolOutcome:
        """Store a tool call's outcome under ``key`` unless one is stored; the stored one."""

    @abstractmethod
    def tool_result(self, job_id: str, key: str) -> ToolOutcome | None:
        """The outcome stored under ``key``, if any."""

    @abstractmethod
    def save_transcript(self, job_id: str, transcript: Transcript) -> None:
        """Store (replace) a node's transcript."""

    @abstractmethod
    def transcript(self, job_id: str, node_id: str) -> Transcript | None:
        """A node's transcript, if it ran with tools."""


class RedisAgents(RedisCore, AgentStore):
    """AgentStore on Redis."""

    def save_tool_result(self, job_id: str, key: str, outcome: ToolOutcome) -> ToolOutcome:
        tools = job_key(job_id, "tools")
        pipe = self._r.pipeline(transaction=False)
        pipe.hsetnx(tools, key, outcome.model_dump_json())
        pipe.hget(tools, key)
        pipe.expire(tools, self._ttl_s)
        _, raw, _ = pipe.execute()
        return ToolOutcome.model_validate_json(raw) if raw else outcome

    def tool_result(self, job_id: str, key: str) -> ToolOutcome | None:
        raw = self._r.hget(job_key(job_id, "tools"), key)
        return ToolOutcome.model_validate_json(raw) if raw else None

    def save_transcript(self, job_id: str, transcript: Transcript) -> None:
        self._hset(job_id, "transcripts", {transcript.node_id: transcript.model_dump_json()})

    def transcript(self, job_id: str, node_id: str) -> Transcript | None:
        raw = self._r.hget(job_key(job_id, "transcripts"), node_id)
        return Transcript.model_validate_json(raw) if raw else None


class MemoryAgents(MemoryCore, AgentStore):
    """AgentStore in process."""

    def save_tool_result(self, job_id: str, key: str, outcome: ToolOutcome) -> ToolOutcome:
        with self._lock:
            return self._job(job_id).tool_results.setdefault(key, outcome)

    def tool_result(self, job_id: str, key: str) -> ToolOutcome | None:
        with self._lock:
            return self._job(job_id).tool_results.get(key)

    def save_transcript(self, job_id: str, transcript: Transcript) -> None:
        with self._lock:
            self._job(job_id).transcripts[transcript.node_id] = transcript

    def transcript(self, job_id: str, node_id: str) -> Transcript | None:
        with self._lock:
            return self._job(job_id).transcripts.get(node_id)
