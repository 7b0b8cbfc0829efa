"""Admission policy, the limits of one model, and the GCRA arithmetic shared by both
controllers (the Lua scripts do the same sums; tests hold the two together).

GCRA (generic cell rate algorithm) keeps one "theoretical arrival time" (TAT) per limit.
With emission interval T per unit and a bucket of ``burst`` units, a call costing ``c`` units
is admitted when ``max(TAT, now) + c*T - burst*T <= now``; admitting sets TAT to
``max(TAT, now) + c*T``. A call larger than the bucket is admitted once the bucket is full
(TAT <= now) and leaves debt. To keep the gateway's sliding-window count under its limit N
even when arrivals at the gateway are shifted by up to ``slack`` against our clock,
``burst + (W + 2*slack) / T <= N*factor``, i.e. ``T = (W + 2*slack) / (N*factor - burst)``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Self

from swarm.catalog import ModelSpec
from swarm.settings import Settings
from swarm.settings_slice import SettingsSlice, setting

MINUTE_MS = 60_000.0
SECOND_MS = 1_000.0
LEASE_MARGIN_S = 15.0
"""Default lease = node timeout + this (the HTTP client ends every call by the timeout)."""


@dataclass(frozen=True)
class AdmissionPolicy(SettingsSlice):
    """Tuning shared by every model; built from Settings at the edge."""

    max_wait_s: float = setting("admission_max_wait_s")
    """A wait up to this long happens in the task; a longer one goes back to the queue."""
    lease_s: float = 60.0
    """Lifetime of an in-flight lease; a dead worker's permit returns after this."""
    window_slack_s: float = setting("admission_window_slack_s")
    """Shift of arrival times at the gateway against admission times that is tolerated."""
    poll_s: float = 0.05
    """Shortest retry hint when the in-flight cap or the fair share refuses (no exact time
    exists); with many waiters the hint grows (``slot_poll_ms``) up to ``max_poll_s``."""
    max_poll_s: float = 1.0
    """Longest retry hint for in-flight and fair-share waits."""
    max_countdown_s: float = setting("admission_max_countdown_s")
    """Longest delay a requeued task is given (keeps it inside the visibility timeout)."""
    decrease: float = 0.7
    """Multiplicative decrease of the rate factor on a 429."""
    increase: float = 0.05
    """Additive increase of the rate factor after each quiet period."""
    quiet_s: float = 5.0
    """A quiet period: this long without a 429 or another change of the factor."""
    min_factor: float = 0.1
    """The factor never drops below this."""
    decrease_cooldown_s: float = 1.0
    """429s within this long after a decrease count as the same overload (one decrease)."""
    default_pause_s: float = 1.0
    """Pause after a 429 that carries no Retry-After or x-ratelimit reset."""
    dense_window_s: float = 5.0
    """Time constant of the model's recent requests and 429s (decaying counts)."""
    dense_min: float = 4.5
    """429s within about that window before their density counts as the tenant's limit
    (4.5: five in quick succession, the decay of the first ones allowed for)."""
    dense_share: float = 0.5
    """Share of recent requests answered 429 that counts as the tenant's limit (an accept
    rate under half: Google SRE's adaptive throttling with K = 2)."""
    request_burst: int = 1
    """Bucket size of the request limits (1 = evenly spaced, no burst)."""
    token_burst_share: float = 0.05
    """Bucket size of the token limit as a share of TPM."""
    tenant_window_s: float = setting("admission_tenant_window_s")
    """Time constant of each tenant's recent token use (swarm.calls.admission.shares)."""

    @classmethod
    def from_settings(cls, settings: Settings, renewed: bool = False, **values: Any) -> Self:
        """The policy named by SWARM_ADMISSION_* settings. ``renewed``: a heartbeat renews
        the permits (a worker), so unless SWARM_ADMISSION_LEASE_S says otherwise they live
        SWARM_LEASE_S, not the longest call."""
        default_s = settings.lease_s if renewed else settings.node_timeout_s + LEASE_MARGIN_S
        lease_s = settings.admission_lease_s or default_s
        return super().from_settings(settings, lease_s=lease_s, **values)


@dataclass(frozen=True)
class Limit:
    """One rate limit of a model."""

    name: str
    """``rpm``, ``rps`` or ``tpm``."""
    limit: int
    """Units per window at factor 1 (the catalog's number)."""
    window_ms: float
    """Length of the gateway's sliding window."""
    burst: int
    """Bucket size in units."""
    tokens: bool
    """True when a call costs its tokens, False when it costs 1."""
    windowed: bool = False
    """Counted as N per window (a log of admission times) rather than a GCRA bucket."""


def model_limits(spec: ModelSpec, policy: AdmissionPolicy) -> tuple[Limit, ...]:
    """The rate limits of ``spec`` (rpm, rps where set, tpm)."""
    burst = policy.request_burst
    windowed = spec.limit_window != "bucket"
    limits = [Limit("rpm", spec.rpm, MINUTE_MS, burst, False, windowed)]
    if spec.rps:
        limits.append(Limit("rps", spec.rps, SECOND_MS, burst, False, windowed))
    token_burst = max(1, int(spec.tpm * policy.token_burst_share))
    limits.append(Limit("tpm", spec.tpm, MINUTE_MS, token_burst, True))
    return tuple(limits)


def interval_ms(limit: Limit, factor: float, slack_ms: float) -> float:
    """Emission interval T (ms per unit) at rate ``factor`` of the catalog limit."""
    allowed = limit.limit * factor
    per_window = max(allowed - limit.burst, allowed / 2.0)
    return (limit.window_ms + 2.0 * slack_ms) / per_window


GCRA_EPSILON_MS = 1e-6
"""A computed wait below this is rounding, not a wait."""


def gcra(tat_ms: float, now_ms: float, cost: float, t_ms: float, burst: int) -> tuple[float, float]:
    """``(wait_ms, new_tat_ms)``: wait 0 means admitted, and then new_tat is to be stored."""
    base = max(tat_ms, now_ms)
    new_tat = base + cost * t_ms
    wait = base - now_ms if cost > burst else new_tat - burst * t_ms - now_ms
    # (now + t) - t - now is not always 0 in floating point: a wait of 1e-13 ms is none
    return (wait if wait > GCRA_EPSILON_MS else 0.0), new_tat


WINDOW_SLACK_SHARE = 0.01
"""A window limit widens its window by at least this share of it on each side (0.6 s of a
minute): the first N calls go out together, and on a busy machine their arrival at the
gateway spreads over more than the fixed slack."""


def window_span_ms(limit: Limit, slack_ms: float) -> float:
    """The window a window limit counts in: the gateway's, widened on each side."""
    return limit.window_ms + 2.0 * max(slack_ms, limit.window_ms * WINDOW_SLACK_SHARE)


def window_wait_ms(times_ms: list[float], now_ms: float, limit: Limit, slack_ms: float) -> float:
    """Wait until one more call fits a window limit, given the admission times (sorted, at
    most a window old): N per (widened) window. Not scaled by the AIMD factor: the count is
    exactly what the gateway enforces, and a 429 on it pauses until the window has room."""
    span = window_span_ms(limit, slack_ms)
    allowed = limit.limit
    inside = [t for t in times_ms if t > now_ms - span]
    if len(inside) < allowed:
        return 0.0
    return max(inside[len(inside) - allowed] + span - now_ms, 0.0)


def window_fills(times_ms: list[float], now_ms: float, limit: Limit, slack_ms: float) -> bool:
    """Whether one more call now fills a window limit (it is the window's N-th)."""
    span = window_span_ms(limit, slack_ms)
    return sum(1 for t in times_ms if t > now_ms - span) + 1 >= limit.limit


def refund_tat(tat_ms: float, now_ms: float, delta_units: float, t_ms: float) -> float:
    """TAT after charging ``delta_units`` more (debt) or fewer (refund, never below now)."""
    if delta_units >= 0:
        return max(tat_ms, now_ms) + delta_units * t_ms
    return max(tat_ms + delta_units * t_ms, now_ms)


RELEASE_EWMA_WEIGHT = 0.1
"""Weight of the newest gap in the mean time between lease releases."""
RELEASE_GAP_CAP_MS = 1000.0
"""Gaps between releases count at most this much (an idle model keeps a usable mean)."""


def slot_poll_ms(
    poll_ms: float,
    max_poll_ms: float,
    waiters: int,
    release_dt_ms: float,
    next_end_ms: float | None = None,
    slots: int = 0,
) -> float:
    """Retry hint of an in-flight or fair-share wait: the waiters together ask about twice
    per lease released (``waiters * mean gap / 2``), between ``poll_ms`` and ``max_poll_ms``.
    While no more callers wait than the model has ``slots``, none waits past ``next_end_ms``,
    when the oldest call out is expected to end (its start plus the mean time calls hold
    their lease): a wave of calls releases its slots within milliseconds, after a gap the
    mean of the gaps would have the waiters sleep through."""
    hint = min(max_poll_ms, waiters * release_dt_ms / 2.0)
    if next_end_ms is not None and waiters <= slots:
        hint = min(hint, next_end_ms)
    return max(poll_ms, hint)


HOLD_EWMA_WEIGHT = 0.2
"""Weight of the newest call in the mean time calls hold their lease."""


def ewma(mean: float | None, value: float, weight: float) -> float:
    """An exponentially weighted mean after ``value``, which weighs ``weight`` (the first
    value, with no mean yet, is the mean)."""
    return value if mean is None else mean * (1.0 - weight) + value * weight


def hold_mean_ms(mean_ms: float | None, held_ms: float) -> float:
    """The mean time calls hold their lease after one held ``held_ms`` (EWMA)."""
    return ewma(mean_ms, max(held_ms, 0.0), HOLD_EWMA_WEIGHT)


def release_mean_ms(mean_ms: float | None, gap_ms: float) -> float:
    """The mean time between releases after a gap of ``gap_ms`` (EWMA; first gap = mean)."""
    return ewma(mean_ms, min(max(gap_ms, 0.0), RELEASE_GAP_CAP_MS), RELEASE_EWMA_WEIGHT)


@lru_cache(maxsize=4096)
def key_prefix(gateway: str, model: str) -> str:
    """``{llm:<gateway hash>:<model>}``: every key of one model in one Redis Cluster slot
    (kept per process: every call asks for its model's)."""
    digest = hashlib.sha1(gateway.encode(), usedforsecurity=False).hexdigest()[:10]
    return f"{{llm:{digest}:{model}}}"


def adaptive_key(gateway: str, backend: str) -> str:
    """The hash of a backend's adaptive in-flight limit, beside its admission keys."""
    return f"{key_prefix(gateway, f'backend:{backend}')}:adaptive"
