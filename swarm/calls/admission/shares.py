"""Fair shares of a model's tokens between tenants: the rule both controllers apply (the
Lua scripts do the same sums; the contract tests hold the two together).

Each model keeps, per tenant, its recent token use: a call is charged when it is admitted
its prompt estimate plus the completion its tenant's calls on the model have had lately (a
running mean, ``expected_completion``; not the completion budget, which would weigh a
tenant's calls in flight far above their cost), and corrected by the reported usage when it
finishes (a failed call refunds it); the sum decays with a time constant of
``tenant_window_s`` (AdmissionPolicy). Charging only the prompt at admission left a tenant
of long answers uncharged for them until they ended, so it went on being admitted past
its share for a call's length. A tenant's *normalized use* is that sum over its weight
(the catalog's ``[tenants]`` table, 1 when not listed). A call stands at its tenant's
normalized use plus half its charge over the weight, a waiting tenant at its normalized
use plus its hold (half its largest call refused lately; ``standing``). While another
tenant waits for the model, a call that stands above the lowest waiting tenant is refused
(``tenant_share``), so over the window each busy tenant gets tokens in proportion to its
weight, whatever the length of its calls. Nobody else waiting, nobody is refused: an idle
share goes to whoever asks. A tenant idle for a while comes back with little recent use, so
its first calls go ahead of a tenant that has been busy all along.

While a tenant is below every waiting tenant's share (*preferred*), the permits given back
are its callers' to take: their retry hint counts its own waiters, not the other tenants'
(who are refused meanwhile).

A refused tenant's wait is about how long the lowest waiting tenant needs to close the gap
at the model's recent token rate (``catch_up_ms``): a tenant just over the line (tenants
of short calls cross it many times a second) waits in its task for a permit, one far over
it goes back to the queue (its worker thread serves other work meanwhile).

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
    completion: float = 0.0
    """Running mean of the completion tokens of its calls (``expected_completion``)."""


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
    tokens = max(decayed_tokens(use, now_ms, window_ms) + tokens, 0.0)
    return Use(tokens, now_ms, weight, use.completion)


COMPLETION_MEAN_WEIGHT = 0.2
"""Weight of a finished call's completion in its tenant's running mean (``completed``)."""


def expected_completion(use: Use) -> float:
    """The completion charged to an admitted call of the tenant before its answer is known:
    the running mean of its calls' completions (0 before its first answer)."""
    return max(use.completion, 0.0)


def completed(use: Use, completion: int | None) -> Use:
    """``use`` with a finished call's reported ``completion`` in its running mean (None:
    not reported, nothing changes; the first one is the mean)."""
    if completion is None or completion < 0:
        return use
    mean = completion if use.completion <= 0 else (
        use.completion + COMPLETION_MEAN_WEIGHT * (completion - use.completion))  # fmt: skip
    return Use(use.tokens, use.at_ms, use.weight, mean)


def correction(delta: float, held_ms: float, window_ms: float) -> float:
    """A finished call's token correction (reported - reserved), decayed as the charge it
    corrects has decayed since the call was admitted ``held_ms`` ago."""
    return delta * math.exp(-max(held_ms, 0.0) / window_ms)


def catch_up_ms(gap: float, weight: float, rate: float) -> float:
    """How long a waiting tenant of ``weight`` needs to close a gap of ``gap`` normalized
    tokens (the refused tenant's normalized use over its own) at ``rate``, the model's
    recent tokens per ms: at least ``gap * weight / rate`` (all of the model its own;
    infinite when the model has no recent tokens)."""
    if gap <= 0:
        return 0.0
    return math.inf if rate <= 0 else gap * weight / rate


def recent_rate(uses: Mapping[str, Use], now_ms: float, window_ms: float) -> float:
    """The model's recent tokens per ms: every tenant's decayed sum over the window."""
    return sum(decayed_tokens(u, now_ms, window_ms) for u in uses.values()) / window_ms


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


HOLD_MS = 3_000.0
"""How long a refused call's hold lasts unless it asks again (its retries come within
SWARM_ADMISSION_MAX_WAIT_S, or the 1 s countdown of a requeue)."""


@dataclass(frozen=True)
class Hold:
    """A tenant's largest call refused lately while another tenant waits: half its
    normalized cost, until when. It stands for the tenant on the line (``standing``)."""

    shift: float = 0.0
    until_ms: float = 0.0


def hold_shift(hold: Hold | None, now_ms: float) -> float:
    """The normalized tokens ``hold`` adds to its tenant's position (0 once it lapsed)."""
    return hold.shift if hold is not None and hold.until_ms > now_ms else 0.0


def call_shift(cost: float, weight: float) -> float:
    """Half a call's cost (its charge at admission) over its tenant's weight."""
    return max(cost, 0.0) / (2.0 * weight)


def held_after_refusal(hold: Hold | None, shift: float, now_ms: float) -> Hold | None:
    """A refused call of ``shift`` holds its tenant's place for HOLD_MS unless a larger
    one already does (a call asking again renews its own hold)."""
    if shift <= 0 or shift < hold_shift(hold, now_ms):
        return hold
    return Hold(shift, now_ms + HOLD_MS)


def held_after_admission(hold: Hold | None, shift: float, now_ms: float) -> Hold | None:
    """The hold once a call of ``shift`` is admitted: gone when the call was as large (the
    held call, or a larger one), else kept for the larger call still waiting."""
    return None if shift >= hold_shift(hold, now_ms) else hold


@dataclass(frozen=True)
class Standing:
    """A tenant's place on the share line against the other tenants waiting."""

    mine: float
    """Its normalized use plus the larger of half its call's cost and its hold."""
    lowest: float
    """The lowest of the waiting tenants' normalized use plus their holds (inf: none)."""
    lowest_weight: float = 1.0
    """The weight of that tenant."""

    @property
    def over(self) -> bool:
        return self.mine > self.lowest

    @property
    def preferred(self) -> bool:
        return self.mine < self.lowest < math.inf


def standing(
    uses: Mapping[str, Use], waiting: Iterable[str], tenant: Tenant, now_ms: float,
    window_ms: float, holds: Mapping[str, Hold] | None = None, shift: float = 0.0,
) -> Standing:  # fmt: skip
    """Where ``tenant``, asking for a call of ``shift`` (``call_shift``), stands against the
    tenants of the waiting job keys. Each tenant is placed at its normalized use plus half
    of its call: a call is admitted when half of it fits below the others, so a large call
    (an aggregation's prompt) goes when its tenant is half its size below the line and
    ends half its size above, not all of it: a tenant left above the line most of the time
    has its excess forgiven by the decay (the long-run gap in tokens per minute is the mean
    gap over the window), and lumps gave their tenant more than its share. The waiting
    tenants' holds (their largest call refused lately) place them the same way; a tenant's
    own hold keeps its small calls from overtaking its large one."""
    holds = holds or {}
    others = {tenant_of(k) for k in waiting} - {tenant.name}
    places = [
        (_norm(uses.get(name, Use()), now_ms, window_ms) + hold_shift(holds.get(name), now_ms),
         uses[name].weight if name in uses else 1.0)
        for name in others
    ]  # fmt: skip
    lowest, weight = min(places, default=(math.inf, 1.0))
    own = max(shift, hold_shift(holds.get(tenant.name), now_ms))
    mine = decayed_tokens(uses.get(tenant.name, Use()), now_ms, window_ms) / tenant.weight
    return Standing(mine + own, lowest, weight)


def _norm(use: Use, now_ms: float, window_ms: float) -> float:
    return decayed_tokens(use, now_ms, window_ms) / use.weight


def share_wait_ms(
    place: Standing, uses: Mapping[str, Use], now_ms: float, window_ms: float
) -> float:
    """How long a tenant at ``place`` (``standing``), over its share, should expect to
    wait: ``catch_up_ms`` of the lowest waiting tenant at the model's recent rate, at most
    ``window_ms`` (0: not over its share). While another tenant waits and the place is
    below every waiting one's (``Standing.preferred``), they are refused, so the permits
    given back are its callers' to take (their retry hint counts them alone)."""
    if not place.over:
        return 0.0
    rate = recent_rate(uses, now_ms, window_ms)
    return min(catch_up_ms(place.mine - place.lowest, place.lowest_weight, rate), window_ms)
