"""Fair shares of a model's tokens between tenants: the rule both controllers apply (the
Lua scripts do the same sums; the contract tests hold the two together).

Each model keeps, per tenant, its recent token use: a call's prompt estimate is charged
when it is admitted (the part of its cost known before it runs; its answer's length is not,
and charging the completion budget would weigh a tenant's calls in flight far above their
cost) and corrected by the reported usage when it finishes (a failed call refunds it), and
the sum decays with a time constant of ``tenant_window_s``
(AdmissionPolicy). A tenant's *normalized use* is that sum over its weight (the catalog's
``[tenants]`` table, 1 when not listed). While another tenant waits for the model, a tenant
whose normalized use is above the lowest among the waiting tenants is refused
(``tenant_share``), so over the window each busy tenant gets tokens in proportion to its
weight, whatever the length of its calls. Nobody else waiting, nobody is refused: an idle
share goes to whoever asks. A tenant idle for a while comes back with little recent use, so
its first calls go ahead of a tenant that has been busy all along.

While a tenant is below every waiting tenant's share (*preferred*), the permits given back
are its callers' to take: their retry hint counts its own waiters, not the other tenants'
(who are refused meanwhile).

Within a tenant, jobs share the model's in-flight slots equally (the per-job fair share,
counted between that tenant's jobs only): leases and waiting jobs are kept under
``job_key(tenant, job)``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from swarm.records import DEFAULT_TENANT

SEPARATOR = "\t"
"""Between tenant and job in a job key (a tenant name never holds one)."""


@dataclass(frozen=True)
class Tenant:
    """Who a call is for, as admission weighs it."""

    name: str = DEFAULT_TENANT
    weight: float = 1.0
    """Share of a model's tokens against the other active tenants' weights."""


DEFAULT = Tenant()


@dataclass(frozen=True)
class Use:
    """A tenant's recent token use on one model, as stored."""

    tokens: float = 0.0
    """Decayed token sum at ``at_ms``."""
    at_ms: float = 0.0
    weight: float = 1.0
    """The tenant's weight when it was last charged."""


@dataclass(frozen=True)
class TenantShare:
    """What `swarm status --models` and the metrics show for one tenant of a model."""

    tenant: str
    weight: float
    tokens: float
    """Recent tokens (decayed sum, about the last ``tenant_window_s``)."""
    share: float
    """Share of the model's recent tokens (0..1)."""
    target: float
    """Share its weight gives it among the tenants shown (0..1)."""


def job_key(tenant: str, job: str) -> str:
    """The key of a job's leases and waits: tenant and job."""
    return f"{tenant}{SEPARATOR}{job}"


def tenant_of(key: str) -> str:
    """The tenant of a job key (a key without a tenant is the default tenant's)."""
    tenant, sep, _ = key.partition(SEPARATOR)
    return tenant if sep else DEFAULT_TENANT


def decayed_tokens(use: Use, now_ms: float, window_ms: float) -> float:
    """``use``'s tokens decayed to ``now_ms`` (never below 0)."""
    return max(use.tokens, 0.0) * math.exp(-max(now_ms - use.at_ms, 0.0) / window_ms)


def charged(use: Use, now_ms: float, window_ms: float, tokens: float, weight: float) -> Use:
    """``use`` decayed to now plus ``tokens`` (a correction may be negative; never below 0)."""
    return Use(max(decayed_tokens(use, now_ms, window_ms) + tokens, 0.0), now_ms, weight)


def correction(delta: float, held_ms: float, window_ms: float) -> float:
    """A finished call's token correction (reported - reserved), decayed as the charge it
    corrects has decayed since the call was admitted ``held_ms`` ago."""
    return delta * math.exp(-max(held_ms, 0.0) / window_ms)


def over_share(mine: float, weight: float, waiting: Iterable[tuple[float, float]]) -> bool:
    """Whether a tenant with recent use ``mine`` and ``weight`` must let the waiting
    tenants (their ``(use, weight)``) go first: its normalized use is above the lowest of
    theirs. No other tenant waiting: never."""
    lowest = min((use / w for use, w in waiting), default=math.inf)
    return mine / weight > lowest


def shares(uses: Mapping[str, Use], now_ms: float, window_ms: float) -> tuple[TenantShare, ...]:
    """Each tenant with at least one recent token: its tokens, its share of them, and the
    share its weight gives it among those tenants; busiest first."""
    recent = {name: (decayed_tokens(u, now_ms, window_ms), u.weight) for name, u in uses.items()}
    recent = {name: tw for name, tw in recent.items() if tw[0] >= 1.0}
    total = sum(t for t, _ in recent.values())
    weights = sum(w for _, w in recent.values())
    rows = [TenantShare(name, w, t, t / total, w / weights) for name, (t, w) in recent.items()]
    return tuple(sorted(rows, key=lambda row: (-row.tokens, row.tenant)))


def job_over_share(
    inflight: Mapping[str, int], waiting: Iterable[str], key: str, max_inflight: int
) -> bool:
    """Whether job ``key`` holds its share of ``max_inflight`` while another job of its
    tenant waits: ``ceil(max_inflight / n)`` for the tenant's n active jobs (holding leases,
    waiting, or asking now). ``inflight``: leases out per job key; ``waiting``: the job keys
    waiting."""
    tenant = tenant_of(key)
    mine = inflight.get(key, 0)
    peers = {k for k in waiting if tenant_of(k) == tenant}
    if mine == 0 or not peers - {key}:
        return False
    active = {k for k in inflight if tenant_of(k) == tenant} | peers | {key}
    return mine >= math.ceil(max_inflight / len(active))


def _normalized(
    uses: Mapping[str, Use], waiting: Iterable[str], tenant: Tenant, now_ms: float,
    window_ms: float,
) -> tuple[float, float]:  # fmt: skip
    """``tenant``'s normalized use and the lowest of the other waiting tenants' (inf: none)."""
    others = {tenant_of(k) for k in waiting} - {tenant.name}
    recent = [uses.get(name, Use()) for name in others]
    lowest = min((decayed_tokens(u, now_ms, window_ms) / u.weight for u in recent),
                 default=math.inf)  # fmt: skip
    return decayed_tokens(uses.get(tenant.name, Use()), now_ms, window_ms) / tenant.weight, lowest


def tenant_over_share(
    uses: Mapping[str, Use], waiting: Iterable[str], tenant: Tenant, now_ms: float,
    window_ms: float,
) -> bool:  # fmt: skip
    """``over_share`` for ``tenant`` against the tenants of the waiting job keys."""
    mine, lowest = _normalized(uses, waiting, tenant, now_ms, window_ms)
    return mine > lowest


def tenant_preferred(
    uses: Mapping[str, Use], waiting: Iterable[str], tenant: Tenant, now_ms: float,
    window_ms: float,
) -> bool:  # fmt: skip
    """Whether another tenant waits and ``tenant``'s normalized use is below every waiting
    one's: while it waits they are refused, so the permits given back are its callers' to
    take (their retry hint counts them alone)."""
    mine, lowest = _normalized(uses, waiting, tenant, now_ms, window_ms)
    return mine < lowest < math.inf
