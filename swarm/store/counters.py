"""Counts of a job's calls the report shows: hedges sent and won (swarm.calls.hedging),
429 answers and retries per model."""

from __future__ import annotations

from abc import ABC, abstractmethod

from swarm.store.core import MemoryCore, RedisCore, job_key
from swarm.store.views import HedgeCounts

RATE_LIMITED, RETRIES = "r429", "retries"
"""The names of the per-model counts (their Redis keys' last part)."""


class CounterStore(ABC):
    """The counters part of the JobStore interface."""

    @abstractmethod
    def take_hedge(self, job_id: str, cap: int) -> bool:
        """Count one hedge of the job unless ``cap`` were sent already; True when counted."""

    @abstractmethod
    def hedge_won(self, job_id: str) -> None:
        """Count a hedge whose answer came first."""

    @abstractmethod
    def hedges(self, job_id: str) -> HedgeCounts:
        """The job's hedge counts."""

    # 429s the gateway answered, whatever admission does (the report's rate_limited)
    def count_rate_limited(self, job_id: str, model: str) -> None:
        """Count one 429 answer to a call of the job on ``model``."""
        self._count(job_id, RATE_LIMITED, model)

    def rate_limited(self, job_id: str) -> dict[str, int]:
        """429 answers per model."""
        return self._counts(job_id, RATE_LIMITED)

    def count_retry(self, job_id: str, model: str) -> None:
        """Count one retry (an attempt after a failed one) of a call of the job on ``model``."""
        self._count(job_id, RETRIES, model)

    def retries(self, job_id: str) -> dict[str, int]:
        """Retries per model."""
        return self._counts(job_id, RETRIES)

    @abstractmethod
    def _count(self, job_id: str, part: str, model: str) -> None:
        """Add one to ``model``'s count in the job's counts named ``part``."""

    @abstractmethod
    def _counts(self, job_id: str, part: str) -> dict[str, int]:
        """The job's counts named ``part``, per model in model order."""


class RedisCounters(RedisCore, CounterStore):
    """CounterStore on Redis: one hash per count, HINCRBY."""

    def take_hedge(self, job_id: str, cap: int) -> bool:
        """Count first, give back when over the cap: never more than ``cap`` are granted
        (a concurrent refusal may refuse one more, which only errs on the safe side)."""
        if self._hincr(job_id, "hedges", "sent") <= cap:
            return True
        self._r.hincrby(job_key(job_id, "hedges"), "sent", -1)
        return False

    def hedge_won(self, job_id: str) -> None:
        self._hincr(job_id, "hedges", "won")

    def hedges(self, job_id: str) -> HedgeCounts:
        sent, won = self._r.hmget(job_key(job_id, "hedges"), ["sent", "won"])
        return HedgeCounts(sent=int(sent or 0), won=int(won or 0))

    def _count(self, job_id: str, part: str, model: str) -> None:
        self._hincr(job_id, part, model)

    def _counts(self, job_id: str, part: str) -> dict[str, int]:
        raw: dict[str, str] = self._r.hgetall(job_key(job_id, part))  # type: ignore[assignment]
        return {model: int(count) for model, count in sorted(raw.items())}


class MemoryCounters(MemoryCore, CounterStore):
    """CounterStore in process."""

    def take_hedge(self, job_id: str, cap: int) -> bool:
        with self._lock:
            job = self._job(job_id)
            if job.hedges.sent >= cap:
                return False
            job.hedges = job.hedges.model_copy(update={"sent": job.hedges.sent + 1})
            return True

    def hedge_won(self, job_id: str) -> None:
        with self._lock:
            job = self._job(job_id)
            job.hedges = job.hedges.model_copy(update={"won": job.hedges.won + 1})

    def hedges(self, job_id: str) -> HedgeCounts:
        with self._lock:
            return self._job(job_id).hedges

    def _count(self, job_id: str, part: str, model: str) -> None:
        with self._lock:
            counts = self._job(job_id).counts.setdefault(part, {})
            counts[model] = counts.get(model, 0) + 1

    def _counts(self, job_id: str, part: str) -> dict[str, int]:
        with self._lock:
            return dict(sorted(self._job(job_id).counts.get(part, {}).items()))
