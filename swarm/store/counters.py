"""Counts of a job's calls the report shows: hedges sent and won (swarm.calls.hedging),
429 answers and retries per model.

Keys (swarm.store.redis lists them all): ``hedges`` (sent, won), ``r429`` and ``retries``
(model -> count).
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from swarm.store.core import MemoryCore, RedisCore, job_key
from swarm.store.views import HedgeCounts


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
    @abstractmethod
    def count_rate_limited(self, job_id: str, model: str) -> None:
        """Count one 429 answer to a call of the job on ``model``."""

    @abstractmethod
    def rate_limited(self, job_id: str) -> dict[str, int]:
        """429 answers per model."""

    @abstractmethod
    def count_retry(self, job_id: str, model: str) -> None:
        """Count one retry (an attempt after a failed one) of a call of the job on ``model``."""

    @abstractmethod
    def retries(self, job_id: str) -> dict[str, int]:
        """Retries per model."""


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

    def count_rate_limited(self, job_id: str, model: str) -> None:
        self._hincr(job_id, "r429", model)

    def rate_limited(self, job_id: str) -> dict[str, int]:
        return self._counts(job_id, "r429")

    def count_retry(self, job_id: str, model: str) -> None:
        self._hincr(job_id, "retries", model)

    def retries(self, job_id: str) -> dict[str, int]:
        return self._counts(job_id, "retries")

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

    def count_rate_limited(self, job_id: str, model: str) -> None:
        with self._lock:
            _bump(self._job(job_id).rate_limited, model)

    def rate_limited(self, job_id: str) -> dict[str, int]:
        with self._lock:
            return dict(sorted(self._job(job_id).rate_limited.items()))

    def count_retry(self, job_id: str, model: str) -> None:
        with self._lock:
            _bump(self._job(job_id).retries, model)

    def retries(self, job_id: str) -> dict[str, int]:
        with self._lock:
            return dict(sorted(self._job(job_id).retries.items()))


def _bump(counts: dict[str, int], model: str) -> None:
    counts[model] = counts.get(model, 0) + 1
