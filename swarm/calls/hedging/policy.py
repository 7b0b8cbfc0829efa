"""When to hedge a call and how many hedges a job may send: pure decisions.

A hedge is one duplicate request for a call that has run longer than the hedge delay:
a fixed delay (SWARM_HEDGE_AFTER_S), or the model's recently observed latency at a
quantile (SWARM_HEDGE_QUANTILE, e.g. the p90, from swarm.calls.hedging.sketch), or the later
of both. Off by default: a hedge is a second billed call whenever the gateway completes
both before one is cancelled.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from swarm.records import JobSpec
from swarm.settings_slice import SettingsSlice, setting


@dataclass(frozen=True)
class HedgePolicy(SettingsSlice):
    """Hedging settings, read once at the edge."""

    after_s: float | None = setting("hedge_after_s")
    """Fixed hedge delay; None = none."""
    quantile: float | None = setting("hedge_quantile")
    """Hedge after the model's observed latency at this quantile; None = not adaptive."""
    max_ratio: float = setting("hedge_max_ratio")
    """Hedges per job at most: this share of its nodes (at least one)."""
    min_samples: int = setting("hedge_min_samples")
    """Observed calls of a model before its quantile is used."""

    @property
    def enabled(self) -> bool:
        """True when a delay is configured (fixed or adaptive) and hedges are allowed."""
        return (self.after_s is not None or self.quantile is not None) and self.max_ratio > 0

    def delay_s(self, observed_s: float | None) -> float | None:
        """Seconds after which a call is hedged, given the model's observed quantile (None
        while too few calls were seen); None = do not hedge this call."""
        if self.quantile is not None and observed_s is not None:
            return max(observed_s, self.after_s or 0.0)
        return self.after_s

    def job_cap(self, spec: JobSpec) -> int:
        """Hedges the job may send: 0 when off or when the job has a budget (a duplicate
        spends money to save time, and the cap must stay a cap), else the share of its
        nodes, at least one."""
        if not self.enabled or spec.budget_usd is not None:
            return 0
        return max(1, math.floor(self.max_ratio * len(spec.node_ids)))


def quantile_of(samples: list[float], q: float) -> float:
    """The ``q`` quantile of ``samples`` (nearest rank; samples need not be sorted)."""
    ordered = sorted(samples)
    rank = min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))
    return ordered[rank]
