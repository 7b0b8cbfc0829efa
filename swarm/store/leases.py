"""Leases: short, renewed rights to work on something of a job.

A worker holds a lease on every task message it is running (``task:<task id>``) and on
every call slot it is calling the gateway for (``claim:<slot>``, the call guard's claim).
A lease lives ``lease_s`` (SWARM_LEASE_S, 10 s by default) unless the worker process's
heartbeat (swarm.store.heartbeat) renews it, so a worker that was killed, frozen or cut off
from Redis loses its leases within seconds instead of after the broker's visibility timeout.

Each lease carries a fencing token: the holder value written when the lease was taken, a
fresh random id per run. Every write that only the holder may make (renewal, the stored
answer of a call, a node's envelope) checks the token in the same Lua script that writes,
so a holder that lost its lease and wakes up cannot write over the run that took over.

Task leases are also listed in one index (a sorted set scored by expiry, on Redis time):
a sweeper in every worker takes a lapsed task lease (one winner per lapse, held until sent)
and sends the task's message again (swarm.jobs.takeover).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from swarm.unique import unique_hex

TASK = "task:"
"""Prefix of the lease on a running task message."""
CLAIM = "claim:"
"""Prefix of the lease on a call slot (swarm.calls.idempotency)."""
HOLD = "hold:"
"""Prefix of the token of a sweeper's hold on a lapsed task lease (swarm.jobs.takeover),
which the next delivery of the message takes over (a live run's lease it does not)."""


@dataclass(frozen=True)
class Lease:
    """One lease a worker process holds."""

    job_id: str
    """The job the leased thing belongs to."""
    name: str
    """``task:<task id>`` or ``claim:<slot>``: the lease's key within the job."""
    token: str = field(default_factory=unique_hex)
    """The fencing token: the holder value, unique per run."""

    @property
    def indexed(self) -> bool:
        """True for task leases, which the sweeper watches for lapses."""
        return self.name.startswith(TASK)

    @property
    def member(self) -> str:
        """The lease's member in the lapse index (task leases)."""
        return f"{self.job_id}|{self.name}"


def task_lease(job_id: str, task_id: str, token: str | None = None) -> Lease:
    """A new lease on a task message, or the one held with ``token``."""
    name = f"{TASK}{task_id}"
    return Lease(job_id, name) if token is None else Lease(job_id, name, token)


def claim_lease(job_id: str, slot: str, token: str) -> Lease:
    """The lease of a call slot held with ``token``."""
    return Lease(job_id, f"{CLAIM}{slot}", token)


def parse_member(member: str) -> tuple[str, str]:
    """(job id, lease name) of an index member."""
    job_id, _, name = member.partition("|")
    return job_id, name
