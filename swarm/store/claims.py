"""Claims and leases in the job store: the claim of a call slot, the leases of running task
messages, and the lapse index the sweepers take lapsed tasks from (the records and what a
lease is: swarm.store.leases)."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from swarm.store.billing import StoredAnswer
from swarm.store.companion import Companion
from swarm.store.core import MemoryCore, RedisCore, job_key, ms, raised
from swarm.store.leases import CLAIM, HOLD, TASK, Lease, parse_member
from swarm.store.script_args import (
    DueArgs,
    IndexArgs,
    LapseArgs,
    ReceiveArgs,
    RenewArgs,
    UnclaimArgs,
)

LEASE_INDEX = "swarm:{leases}:due"
"""The lapse index of task leases (swarm.store.leases)."""


class ClaimStore(ABC):
    """The claims and leases part of the JobStore interface."""

    def claim(self, job_id: str, slot: str, owner: str, ttl_s: float) -> bool:
        """Take the exclusive right to call the gateway for ``slot`` (a node) for ``ttl_s``;
        False while another owner holds it."""
        return self.claim_or_answer(job_id, slot, owner, ttl_s)[0]

    @abstractmethod
    def unclaim(self, job_id: str, slot: str, owner: str) -> None:
        """Drop ``owner``'s claim on ``slot`` (nothing if it is not ``owner``'s)."""

    @abstractmethod
    def claim_or_answer(
        self,
        job_id: str,
        slot: str,
        owner: str,
        ttl_s: float,
        key: str | None = None,
        companion: Companion | None = None,
    ) -> tuple[bool, StoredAnswer | None]:
        """``claim`` and the answer stored under ``key`` (None: no answer is read),
        together; ``companion`` (another module's command, swarm.store.companion) runs with them
        (in their round trip when it can)."""

    # -- task leases: heartbeats, fencing, take-over of lapsed tasks --
    @abstractmethod
    def take_task_lease(self, lease: Lease, ttl_s: float, signature: str) -> bool:
        """Hold ``lease`` on a running task message for ``ttl_s`` unless another run holds
        it, and keep ``signature``, the JSON that sends it again; True when ``lease`` holds
        it now. A lease that lapsed or was released is taken; one a live run renews is not:
        a message delivered again while its run goes on (the broker's redelivery of a run
        slower than the visibility timeout, a RabbitMQ connection lost) is that run's
        duplicate, and taking the lease would fence off the run doing the work."""

    @abstractmethod
    def defer_task(self, lease: Lease, delay_s: float, signature: str) -> None:
        """Keep ``signature`` (the JSON that sends task ``lease``'s message) and list its
        member in the lapse index as due in ``delay_s``, so that a sweeper sends it then:
        a message that must run later waits here, not in one worker's memory. A lease
        held with ``lease``'s token (the run that defers its own next run) is released;
        a lease another run holds stays, and its run's lease decides."""

    @abstractmethod
    def hasten_deferred(self, job_id: str) -> int:
        """Make every deferred task of ``job_id`` (in the index, no run holding its lease)
        due now; how many (a cancel: the nodes waiting in countdowns end at once)."""

    @abstractmethod
    def renew_leases(self, leases: Sequence[Lease], ttl_s: float) -> set[Lease]:
        """Extend each lease still held with its token to live ``ttl_s`` from now at least
        (never shortened); the ones lost."""

    @abstractmethod
    def release_lease(self, lease: Lease) -> None:
        """Drop a lease if it still holds ``lease``'s token."""

    @abstractmethod
    def lapsed_tasks(self, limit: int) -> list[str]:
        """Index members of task leases that lapsed (at most ``limit``)."""

    @abstractmethod
    def take_lapse(self, member: str, token: str, hold_s: float) -> str | None:
        """Hold a lapsed task lease for this sweeper (one winner): its lease set with
        ``token`` for ``hold_s``, its member due again then; the signature that sends its
        message again, or None. A sweeper that dies before ``settle_lapse`` leaves a lapse
        that falls due again (swarm.jobs.takeover)."""

    @abstractmethod
    def settle_lapse(self, member: str, token: str) -> None:
        """The message of a lapse held with ``token`` was sent: drop the hold and the
        member, unless a run that received the message holds the lease by now."""

    @abstractmethod
    def held_tasks(self, job_id: str, task_ids: Sequence[str]) -> set[str]:
        """Those of ``task_ids`` whose message some run leased: the lease is live, or it
        lapsed and waits in the index for a sweeper (swarm.jobs.lost_messages)."""


class RedisClaims(RedisCore, ClaimStore):
    """ClaimStore on Redis."""

    def claim_or_answer(
        self,
        job_id: str,
        slot: str,
        owner: str,
        ttl_s: float,
        key: str | None = None,
        companion: Companion | None = None,
    ) -> tuple[bool, StoredAnswer | None]:
        """One round trip: SET NX the claim, read its owner (and the answer stored under
        ``key``), and ``companion`` (swarm.store.companion) when it can go in the same pipeline.
        Durable (WAIT): a claim lost in a failover lets a duplicate run call at the same time."""
        claim = job_key(job_id, f"{CLAIM}{slot}")

        def write(pipe: Any) -> None:
            pipe.set(claim, owner, nx=True, px=ms(ttl_s))
            pipe.get(claim)
            if key is not None:
                pipe.hget(job_key(job_id, "answers"), key)

        taken, holder, *raw = raised(self._write_with(write, companion))
        stored = StoredAnswer.model_validate_json(raw[0]) if raw and raw[0] else None
        return bool(taken) or holder == owner, stored

    def unclaim(self, job_id: str, slot: str, owner: str) -> None:
        self._scripts.run(UnclaimArgs(job_key(job_id, f"{CLAIM}{slot}"), owner))

    def take_task_lease(self, lease: Lease, ttl_s: float, signature: str) -> bool:
        """One round trip, in this order: the signature, the lapse index, the lease (unless
        a live run holds it: receive.lua). Whatever prefix of it Redis ran before a
        connection broke is safe: an indexed member whose lease was never set is a lapse
        (the key is the truth) that a sweeper sends again with its signature; a signature
        alone is a message this worker could not lease (the broker redelivers it). A live
        holder's index member is moved by its next renewal; a sweeper's hold is taken over.
        Durable (WAIT): a lease lost in a failover fences its own run off (its renewal finds
        it gone) with no index member left for a sweeper to send the task again."""
        ttl_ms = ms(ttl_s)
        key = job_key(lease.job_id, lease.name)

        def write(pipe: Any) -> None:
            self._list_task(pipe, lease, signature, ttl_ms)
            self._scripts.run(ReceiveArgs(key, lease.token, ttl_ms, HOLD), client=pipe)

        return bool(int(self._durable.write(write)[-1]))

    def defer_task(self, lease: Lease, delay_s: float, signature: str) -> None:
        """One round trip, in this order: the signature, the index member due in
        ``delay_s``, then the run's own lease released (a prefix of it that ran is safe:
        a lease left set lapses within its lifetime, and the due member is sent then).
        Durable (WAIT), as a lease is."""
        due_ms = max(int(delay_s * 1000), 0)

        def write(pipe: Any) -> None:
            self._list_task(pipe, lease, signature, due_ms)
            own = UnclaimArgs(job_key(lease.job_id, lease.name), lease.token)
            self._scripts.run(own, client=pipe)

        self._durable.write(write)

    def _list_task(self, pipe: Any, lease: Lease, signature: str, due_ms: int) -> None:
        """Queue on ``pipe``: the task's signature, then its index member due in ``due_ms``."""
        resend = job_key(lease.job_id, "resend")
        pipe.hset(resend, lease.name.partition(":")[2], signature)
        pipe.expire(resend, self._ttl_s)
        self._scripts.run(IndexArgs(LEASE_INDEX, due_ms, "add", (lease.member,)), client=pipe)

    def hasten_deferred(self, job_id: str) -> int:
        """Three round trips: the job's task ids (its resend hash), which of them are listed
        and not leased, then those moved to now (``XX``: a member a sweeper took meanwhile
        stays off; one a run leased meanwhile is moved back by the run's next renewal)."""
        task_ids = [str(t) for t in self._r.hkeys(job_key(job_id, "resend"))]
        found = self._task_states(job_id, task_ids)
        waiting = tuple(m for _, m, leased, due in found if not leased and due is not None)
        if waiting:
            self._scripts.run(IndexArgs(LEASE_INDEX, 0, "renew", waiting))
        return len(waiting)

    def _task_states(self, job_id: str, task_ids: Sequence[str]) -> list[tuple[str, str, Any, Any]]:
        """(task id, index member, lease exists, due in the index) of each task: one round
        trip."""
        if not task_ids:
            return []
        members = [Lease(job_id, f"{TASK}{task_id}", "").member for task_id in task_ids]
        pipe = self._r.pipeline(transaction=False)
        for task_id, member in zip(task_ids, members, strict=True):
            pipe.exists(job_key(job_id, f"{TASK}{task_id}"))
            pipe.zscore(LEASE_INDEX, member)
        found = pipe.execute()
        return list(zip(task_ids, members, found[::2], found[1::2], strict=True))

    def renew_leases(self, leases: Sequence[Lease], ttl_s: float) -> set[Lease]:
        """One round trip renews every lease (one script per job), a second moves the
        renewed task leases' expiry in the lapse index."""
        by_job: dict[str, list[Lease]] = {}
        for lease in leases:
            by_job.setdefault(lease.job_id, []).append(lease)
        if not by_job:
            return set()
        ttl_ms = ms(ttl_s)
        pipe = self._r.pipeline(transaction=False)
        for job_id, held in by_job.items():
            keys = tuple(job_key(job_id, lease.name) for lease in held)
            tokens = tuple(lease.token for lease in held)
            self._scripts.run(RenewArgs(keys, ttl_ms, tokens), client=pipe)
        results = pipe.execute()
        lost: set[Lease] = set()
        for held, kept in zip(by_job.values(), results, strict=True):
            lost.update(lease for lease, ok in zip(held, kept, strict=True) if not int(ok))
        renewed = tuple(x.member for x in leases if x.indexed and x not in lost)
        if renewed:
            self._scripts.run(IndexArgs(LEASE_INDEX, ttl_ms, "renew", renewed))
        return lost

    def release_lease(self, lease: Lease) -> None:
        """The lease, then its index member, and only while the lease holds ``lease``'s
        token: a member whose lease another run took is that run's, and without it a
        sweeper would never send the message again if that run stopped. (A sweeper that
        looks between the two sends a finished message again: it finds the work done.)"""
        released = self._scripts.run(UnclaimArgs(job_key(lease.job_id, lease.name), lease.token))
        if lease.indexed and int(released):
            self._r.zrem(LEASE_INDEX, lease.member)

    def lapsed_tasks(self, limit: int) -> list[str]:
        return [str(m) for m in self._scripts.run(DueArgs(LEASE_INDEX, limit))]

    def take_lapse(self, member: str, token: str, hold_s: float) -> str | None:
        """One script: the lease key is the truth (a renewal may not have moved the index
        yet), the hold set with ``token`` picks the one winner."""
        raw = self._scripts.run(_lapse_args("take", member, token, hold_s))
        return str(raw) if raw else None

    def settle_lapse(self, member: str, token: str) -> None:
        self._scripts.run(_lapse_args("settle", member, token, 0))

    def held_tasks(self, job_id: str, task_ids: Sequence[str]) -> set[str]:
        """One round trip: EXISTS of the lease and ZSCORE in the lapse index per task."""
        found = self._task_states(job_id, task_ids)
        return {task_id for task_id, _, leased, due in found if leased or due is not None}


def _lapse_args(mode: str, member: str, token: str, hold_s: float) -> LapseArgs:
    job_id, name = parse_member(member)
    lease, resend = job_key(job_id, name), job_key(job_id, "resend")
    task_id = name.partition(":")[2]
    return LapseArgs(LEASE_INDEX, lease, resend, mode, member, token, ms(hold_s), task_id)


class MemoryClaims(MemoryCore, ClaimStore):
    """ClaimStore in process."""

    def claim_or_answer(
        self,
        job_id: str,
        slot: str,
        owner: str,
        ttl_s: float,
        key: str | None = None,
        companion: Companion | None = None,
    ) -> tuple[bool, StoredAnswer | None]:
        with self._lock:
            job, now = self._job(job_id), time.monotonic()
            held = job.leases.get(CLAIM + slot)
            claimed = held is None or held[1] <= now or held[0] == owner  # else another's
            if claimed:  # taken, or renewed
                job.leases[CLAIM + slot] = (owner, now + ttl_s)
            stored = job.answers.get(key) if key is not None else None
        if companion is not None:
            companion.run()
        return claimed, stored

    def unclaim(self, job_id: str, slot: str, owner: str) -> None:
        self.release_lease(Lease(job_id, CLAIM + slot, owner))

    def take_task_lease(self, lease: Lease, ttl_s: float, signature: str) -> bool:
        with self._lock:
            job = self._job(lease.job_id)
            job.signatures[lease.name.removeprefix(TASK)] = signature
            token, until = job.leases.get(lease.name, ("", 0.0))
            live = until > time.monotonic() and token not in ("", lease.token)
            if live and not token.startswith(HOLD):  # a deferred task's holds no token
                return False
            job.leases[lease.name] = (lease.token, time.monotonic() + ttl_s)
            return True

    def defer_task(self, lease: Lease, delay_s: float, signature: str) -> None:
        with self._lock:
            job = self._job(lease.job_id)
            job.signatures[lease.name.removeprefix(TASK)] = signature
            held = job.leases.get(lease.name)
            if held is None or held[0] == lease.token:
                job.leases[lease.name] = ("", time.monotonic() + delay_s)

    def hasten_deferred(self, job_id: str) -> int:
        now = time.monotonic()
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None:
                return 0
            leases = job.leases.items()
            waiting = [n for n, (token, _) in leases if n.startswith(TASK) and not token]
            for name in waiting:
                job.leases[name] = ("", now)
            return len(waiting)

    def renew_leases(self, leases: Sequence[Lease], ttl_s: float) -> set[Lease]:
        lost: set[Lease] = set()
        with self._lock:
            for lease in leases:
                job = self._jobs.get(lease.job_id)
                if job is None or not job.holds(lease):
                    lost.add(lease)
                    continue
                until = max(job.leases[lease.name][1], time.monotonic() + ttl_s)
                job.leases[lease.name] = (lease.token, until)
        return lost

    def release_lease(self, lease: Lease) -> None:
        with self._lock:
            job = self._jobs.get(lease.job_id)
            if job is not None and job.leases.get(lease.name, ("", 0.0))[0] == lease.token:
                del job.leases[lease.name]

    def lapsed_tasks(self, limit: int) -> list[str]:
        now = time.monotonic()
        with self._lock:
            return [
                Lease(job_id, name, held[0]).member
                for job_id, job in self._jobs.items()
                for name, held in job.leases.items()
                if name.startswith(TASK) and held[1] <= now
            ][:limit]

    def take_lapse(self, member: str, token: str, hold_s: float) -> str | None:
        job_id, name = parse_member(member)
        now = time.monotonic()
        with self._lock:
            job = self._jobs.get(job_id)
            held = job.leases.get(name) if job is not None else None
            if job is None or held is None or held[1] > now:
                return None
            signature = job.signatures.get(name.removeprefix(TASK))
            if signature is None:
                del job.leases[name]
            else:
                job.leases[name] = (HOLD + token, now + hold_s)
            return signature

    def settle_lapse(self, member: str, token: str) -> None:
        job_id, name = parse_member(member)
        self.release_lease(Lease(job_id, name, HOLD + token))

    def held_tasks(self, job_id: str, task_ids: Sequence[str]) -> set[str]:
        with self._lock:
            job = self._jobs.get(job_id)
            leases = job.leases if job is not None else {}
            return {task_id for task_id in task_ids if TASK + task_id in leases}
