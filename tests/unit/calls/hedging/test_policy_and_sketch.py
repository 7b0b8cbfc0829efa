"""Hedging decisions (pure) and the latency sketch in its in-process form."""

from __future__ import annotations

import pytest
from doubles import job_spec

from swarm.calls.hedging import HedgePolicy, LatencySketch
from swarm.calls.hedging.policy import quantile_of
from swarm.records import JobSpec
from swarm.settings import Settings


def spec(nodes: int, budget_usd: float | None = None) -> JobSpec:
    return job_spec(nodes, budget_usd=budget_usd)


def test_off_by_default() -> None:
    policy = HedgePolicy.from_settings(Settings())
    assert not policy.enabled
    assert policy.delay_s(None) is None and policy.delay_s(2.0) is None
    assert policy.job_cap(spec(100)) == 0


@pytest.mark.parametrize(
    ("after_s", "quantile", "observed", "delay"),
    [
        (1.5, None, None, 1.5),  # fixed delay
        (1.5, None, 3.0, 1.5),  # fixed: what was observed does not matter
        (None, 0.9, None, None),  # adaptive, too few samples yet: no hedge
        (None, 0.9, 1.7, 1.7),  # adaptive: the observed quantile
        (2.0, 0.9, 1.7, 2.0),  # both: the later of the two
        (1.0, 0.9, None, 1.0),  # both, no samples yet: the fixed delay
    ],
)
def test_delay(
    after_s: float | None, quantile: float | None, observed: float | None, delay: float | None
) -> None:
    assert HedgePolicy(after_s=after_s, quantile=quantile).delay_s(observed) == delay


@pytest.mark.parametrize(
    ("nodes", "ratio", "budget", "cap"),
    [(100, 0.1, None, 10), (5, 0.1, None, 1), (10, 0.2, None, 2), (100, 0.1, 1.0, 0)],
)
def test_job_cap(nodes: int, ratio: float, budget: float | None, cap: int) -> None:
    policy = HedgePolicy(after_s=1.0, max_ratio=ratio)
    assert policy.job_cap(spec(nodes, budget)) == cap


def test_quantile_of_is_nearest_rank() -> None:
    samples = [float(v) for v in range(10, 0, -1)]  # 10 .. 1, unsorted on purpose
    assert quantile_of(samples, 0.9) == 9.0
    assert quantile_of(samples, 0.5) == 5.0
    assert quantile_of(samples, 0.99) == 10.0


def test_sketch_waits_for_enough_samples_and_forgets_old_ones() -> None:
    sketch = LatencySketch(None, "http://gw/v1", window=20)
    for latency in (1.0,) * 9:
        sketch.observe("m", latency)
    assert sketch.quantile("m", 0.9, min_samples=10) is None
    sketch.observe("m", 5.0)
    assert sketch.quantile("m", 0.9, min_samples=10) == 1.0
    assert sketch.quantile("m", 0.95, min_samples=10) == 5.0
    for _ in range(20):  # a faster period pushes the old ones out of the window
        sketch.observe("m", 0.5)
    assert sketch.quantile("m", 0.99, min_samples=10) == 0.5
    assert sketch.quantile("other", 0.9, min_samples=1) is None
