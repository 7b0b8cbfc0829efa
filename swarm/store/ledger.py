"""Billing in the job store: the exactly-once ledger, stored answers and the budget
(the records: swarm.store.billing)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from swarm.records import NodeEnvelope, Usage
from swarm.store.billing import (
    BilledCall,
    BudgetState,
    HeldAnswer,
    LedgerLine,
    StoredAnswer,
    admits,
)
from swarm.store.companion import Companion
from swarm.store.core import MemoryCore, RedisCore, fence_key, fence_token, job_key
from swarm.store.leases import Lease
from swarm.store.nodes import node_keys, node_write
from swarm.store.script_args import (
    CallLine,
    FinishBilledArgs,
    LedgerKeys,
    RecordArgs,
    ReleaseArgs,
    ReserveArgs,
)

_LEDGER_FIELDS = ("calls", *Usage.model_fields)
"""The fields of a ledger line in the ledger hash (``"<model>|<field>"``)."""


def _ledger_keys(job_id: str) -> LedgerKeys:
    parts = ("billed", "ledger", "budget", "answers")
    return LedgerKeys(*(job_key(job_id, part) for part in parts))


class LedgerStore(ABC):
    """The billing part of the JobStore interface: exactly-once ledger, stored answers,
    budget (swarm.store.billing)."""

    @abstractmethod
    def record_call(self, job_id: str, call: BilledCall, fence: Lease | None = None) -> bool:
        """Atomically count a billed call once by its id (ledger and spent budget) and store
        its answer under its key unless one is stored or the run lost ``fence`` (its claim);
        a run that stores its answer under ``fence`` is done with the slot and the claim is
        released with it. True when counted by this call."""

    def record_held(self, job_id: str, held: HeldAnswer) -> None:
        """Write a held answer without its envelope (an error on the way), then
        ``held.companion`` alone."""
        self.record_call(job_id, held.call, fence=held.claim)
        if held.companion is not None:
            held.companion.run()

    @abstractmethod
    def answer(self, job_id: str, key: str) -> StoredAnswer | None:
        """The answer stored under an idempotency key, if any."""

    @abstractmethod
    def ledger(self, job_id: str) -> dict[str, LedgerLine]:
        """Billed calls per model."""

    @abstractmethod
    def reserve(
        self, job_id: str, reservation_id: str, amount_nusd: int, *, closing: bool = False
    ) -> bool:
        """Reserve a call's estimated cost (see billing.admits); False when refused."""

    @abstractmethod
    def release(self, job_id: str, reservation_id: str) -> None:
        """Give a reservation back (idempotent)."""

    @abstractmethod
    def budget(self, job_id: str) -> BudgetState:
        """The job's cap, spent and reserved amounts."""


class RedisLedger(RedisCore, LedgerStore):
    """LedgerStore on Redis."""

    def record_call(self, job_id: str, call: BilledCall, fence: Lease | None = None) -> bool:
        answer_key = call.answer_key if call.answer is not None and call.answer_key else ""
        answer = call.answer.model_dump_json() if call.answer is not None and answer_key else ""
        args = RecordArgs(
            ledger_keys=_ledger_keys(job_id),
            fence=fence_key(job_id, fence),
            call=CallLine.of(call),
            answer_key=answer_key,
            answer=answer,
            ttl_s=self._ttl_s,
            fence_token=fence_token(fence),
        )
        # Durable (WAIT) and tried again through an outage: a line lost in a failover is a
        # call the gateway billed that the ledger misses, and its answer lost a call made
        # again. Idempotent by call id, so a try whose reply was lost counts once. With no
        # WAIT to send, the script goes alone (EVALSHA, not a pipeline's EVAL of its text).
        return bool(self._durable.retrying(lambda: self._durable_script(args)))

    def finish_billed_node(
        self, job_id: str, envelope: NodeEnvelope, fence: Lease | None, held: HeldAnswer
    ) -> bool:
        """One script (finish_billed.lua), durable and tried again through an outage as
        record_call: counted once by call id, so a try whose reply was lost counts once;
        ``held.companion`` in its round trip."""
        call = held.call
        assert call.answer is not None and call.answer_key is not None
        args = FinishBilledArgs(
            node_keys=node_keys(job_id, fence),
            ledger_keys=_ledger_keys(job_id),
            claim=job_key(job_id, held.claim.name),
            node=node_write(envelope, fence, self._ttl_s),
            call=CallLine.of(call),
            answer_key=call.answer_key,
            answer=call.answer.model_dump_json(),
            claim_token=held.claim.token,
        )
        pending = held.companion

        def write() -> (
            Any
        ):  # the companion goes with the first try only: a retry never runs it twice
            nonlocal pending
            companion, pending = pending, None
            return self._durable_script(args, companion)

        return int(self._durable.retrying(write)) == 1

    def _durable_script(
        self, args: FinishBilledArgs | RecordArgs, companion: Companion | None = None
    ) -> Any:
        """A script's result, then WAIT when one is due (a pipeline's EVAL), with ``companion``
        (swarm.store.companion) in the same round trip when it can go in it; alone as EVALSHA
        otherwise."""
        waits = self._durable.waits()
        if companion is None and not waits:
            return self._scripts.run(args)

        def build(pipe: Any) -> None:
            if waits:
                self._scripts.run(args, client=pipe)
            else:
                self._scripts.queue(args, pipe)

        return self._scripts.reply(args, self._write_with(build, companion)[0])

    def answer(self, job_id: str, key: str) -> StoredAnswer | None:
        raw = self._r.hget(job_key(job_id, "answers"), key)
        return StoredAnswer.model_validate_json(raw) if raw else None

    def ledger(self, job_id: str) -> dict[str, LedgerLine]:
        raw: dict[str, str] = self._r.hgetall(job_key(job_id, "ledger"))  # type: ignore[assignment]
        fields: dict[str, dict[str, int]] = {}
        for name, value in raw.items():
            model, _, field = name.rpartition("|")
            if field in _LEDGER_FIELDS:
                fields.setdefault(model, {})[field] = int(value)
        return {
            model: LedgerLine(
                calls=f.get("calls", 0),
                usage=Usage(**{k: v for k, v in f.items() if k != "calls"}),
            )
            for model, f in sorted(fields.items())
        }

    def reserve(
        self, job_id: str, reservation_id: str, amount_nusd: int, *, closing: bool = False
    ) -> bool:
        args = ReserveArgs(
            job_key(job_id, "budget"),
            reservation_id,
            amount_nusd,
            "1" if closing else "0",
            self._ttl_s,
        )
        return bool(self._scripts.run(args))

    def release(self, job_id: str, reservation_id: str) -> None:
        self._scripts.run(ReleaseArgs(job_key(job_id, "budget"), reservation_id))

    def budget(self, job_id: str) -> BudgetState:
        raw: dict[str, str] = self._r.hgetall(job_key(job_id, "budget"))  # type: ignore[assignment]
        cap = raw.get("cap_nusd")
        return BudgetState(
            cap_nusd=int(cap) if cap is not None else None,
            spent_nusd=int(raw.get("spent_nusd", 0)),
            reserved_nusd=int(raw.get("reserved_nusd", 0)),
            exhausted="exhausted" in raw,
        )


class MemoryLedger(MemoryCore, LedgerStore):
    """LedgerStore in process."""

    def record_call(self, job_id: str, call: BilledCall, fence: Lease | None = None) -> bool:
        with self._lock:
            job = self._job(job_id)
            fenced = fence is not None and not job.holds(fence)
            if call.answer_key is not None and call.answer is not None and not fenced:
                job.answers.setdefault(call.answer_key, call.answer)
                if fence is not None:  # the slot is done: its claim ends with the answer
                    job.leases.pop(fence.name, None)
            if call.call_id in job.billed:
                return False
            job.billed.add(call.call_id)
            line = job.ledger.get(call.model, LedgerLine())
            job.ledger[call.model] = LedgerLine(calls=line.calls + 1, usage=line.usage + call.usage)
            spent = job.budget.spent_nusd + call.cost_nusd
            job.budget = job.budget.model_copy(update={"spent_nusd": spent})
            return True

    def answer(self, job_id: str, key: str) -> StoredAnswer | None:
        with self._lock:
            return self._job(job_id).answers.get(key)

    def ledger(self, job_id: str) -> dict[str, LedgerLine]:
        with self._lock:
            return dict(self._job(job_id).ledger)

    def reserve(
        self, job_id: str, reservation_id: str, amount_nusd: int, *, closing: bool = False
    ) -> bool:
        with self._lock:
            job = self._job(job_id)
            if job.budget.cap_nusd is None or reservation_id in job.reservations:
                return True
            if not admits(job.budget, amount_nusd, closing=closing):
                if not closing:
                    job.budget = job.budget.model_copy(update={"exhausted": True})
                return False
            job.reservations[reservation_id] = amount_nusd
            reserved = job.budget.reserved_nusd + amount_nusd
            job.budget = job.budget.model_copy(update={"reserved_nusd": reserved})
            return True

    def release(self, job_id: str, reservation_id: str) -> None:
        with self._lock:
            job = self._job(job_id)
            amount = job.reservations.pop(reservation_id, None)
            if amount is not None:
                reserved = job.budget.reserved_nusd - amount
                job.budget = job.budget.model_copy(update={"reserved_nusd": reserved})

    def budget(self, job_id: str) -> BudgetState:
        with self._lock:
            return self._job(job_id).budget
