"""What a process keeps for the catalog's local backends, built only when it has one.

A local backend's calls take the local steps (swarm.calls.local_steps): their completion is
paced to the node timeout, their request is read past its deadline (overtime) and its
permits held meanwhile (abandoned permits), and the backend's in-flight limit is found from
latency (adaptive; applied by swarm.calls.admission.backend). A process whose catalog has
no local backend (and no backend made adaptive) builds none of that: its Runtime's
``local`` is None.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import partial

import redis

from swarm.calls.admission.limits import adaptive_key, key_prefix
from swarm.calls.local.abandoned import AbandonedPermits
from swarm.calls.local.adaptive import AdaptiveLimits, MemoryAdaptive, RedisAdaptive
from swarm.calls.local.overtime import Overtime
from swarm.calls.local.pacing import Pacing, SharedPacing
from swarm.catalog import Catalog
from swarm.settings import Settings


@dataclass(frozen=True)
class LocalKit:
    """The local backends' state of one process; the defaults keep it all in process,
    with overtime off."""

    pacing: Pacing = field(default_factory=Pacing)
    """Each model's measured speed: completion budgets that fit the node timeout."""
    overtime: Overtime = field(default_factory=Overtime)
    """Requests read past their node's deadline, their late answers billed."""
    abandoned: AbandonedPermits = field(default_factory=AbandonedPermits)
    """The admission permits those requests hold until they end, or until they show they
    hang."""
    adaptive: AdaptiveLimits = field(default_factory=MemoryAdaptive)
    """The adaptive backends' in-flight limits (the admission's BackendAdmission reads
    and feeds them)."""

    @classmethod
    def in_process(cls, settings: Settings) -> LocalKit:
        """The embedded mode's: in this process, overtime and patience from ``settings``."""
        return cls(
            overtime=Overtime.from_settings(settings),
            abandoned=AbandonedPermits.from_settings(settings),
        )

    @classmethod
    def shared(cls, settings: Settings, gateway: str, client: redis.Redis) -> LocalKit:
        """A worker's: paces and adaptive limits shared by every worker of ``gateway``
        through ``client`` (the job store's Redis), beside its admission keys."""
        learned = key_prefix(gateway, "learned")
        return replace(
            cls.in_process(settings),
            pacing=SharedPacing(client, f"{learned}:paces:v3"),  # v3: a pace's sums as one list
            adaptive=RedisAdaptive(client, partial(adaptive_key, gateway)),
        )


def needs_kit(catalog: Catalog) -> bool:
    """True when a backend of ``catalog`` is local or has an adaptive in-flight limit."""
    return any(spec.is_local or spec.is_adaptive for spec in catalog.backends.values())
