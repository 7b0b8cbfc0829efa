"""Markers, random faults and latency sampling."""

from __future__ import annotations

import math
import statistics
from collections import Counter

import pytest

from swarm.sim.config import SimConfig
from swarm.sim.faults import (
    Fault,
    FaultInjector,
    LatencyModel,
    Markers,
    parse_markers,
    plan_request,
)


def sample_ms(model: LatencyModel, rate_rps: float, inflight: int = 0) -> float:
    """One request's latency as the fault plan draws it: a base sample times the slowdown."""
    return model.base_ms() * model.slowdown(rate_rps, inflight)


def test_no_markers() -> None:
    assert parse_markers("just a prompt [[other]] [[sim:]]") == Markers()


def test_every_marker_is_parsed() -> None:
    text = (
        "x [[sim:status=503]] [[sim:hang]] [[sim:bad_json]] [[sim:drop]] "
        "[[sim:latency_ms=250]] [[sim:empty_choices]] [[sim:no_usage]]"
    )
    assert parse_markers(text) == Markers(
        status=503,
        hang=True,
        bad_json=True,
        drop=True,
        latency_ms=250,
        empty_choices=True,
        no_usage=True,
    )


@pytest.mark.parametrize("text", ["[[sim:status=200]]", "[[sim:status=600]]", "[[sim:hang=1]]"])
def test_invalid_markers_are_ignored(text: str) -> None:
    assert parse_markers(text) == Markers()


@pytest.mark.parametrize(
    ("text", "fault", "status"),
    [
        ("[[sim:status=400]] [[sim:drop]]", Fault.STATUS, 400),
        ("[[sim:hang]] [[sim:drop]]", Fault.DROP, None),
        ("[[sim:bad_json]] [[sim:hang]]", Fault.HANG, None),
        ("[[sim:bad_json]]", Fault.BAD_JSON, None),
    ],
)
def test_marker_precedence(text: str, fault: Fault, status: int | None) -> None:
    config = SimConfig(error_rate=1.0)  # markers win over random faults
    markers = parse_markers(text)
    plan = plan_request(markers, FaultInjector(config), LatencyModel(config), 0.0)
    assert (plan.fault, plan.status) == (fault, status)


def test_shape_markers_combine_with_random_faults() -> None:
    config = SimConfig(error_rate=1.0)
    markers = parse_markers("[[sim:no_usage]] [[sim:empty_choices]]")
    plan = plan_request(markers, FaultInjector(config), LatencyModel(config), 0.0)
    assert plan.fault is Fault.STATUS
    assert plan.no_usage and plan.empty_choices


def test_latency_marker_is_exact_and_not_slowed_down() -> None:
    config = SimConfig(latency_ms=1000, knee_rps=1)
    plan = plan_request(
        parse_markers("[[sim:latency_ms=20]]"), FaultInjector(config), LatencyModel(config), 50.0
    )
    assert plan.latency_s == pytest.approx(0.02)


def test_fault_rates_are_respected_and_seeded() -> None:
    config = SimConfig(error_rate=0.2, hang_rate=0.1, drop_rate=0.05, seed=7)
    injector = FaultInjector(config)
    counts = Counter(injector.draw()[0] for _ in range(20_000))
    assert counts[Fault.STATUS] / 20_000 == pytest.approx(0.2, abs=0.015)
    assert counts[Fault.HANG] / 20_000 == pytest.approx(0.1, abs=0.01)
    assert counts[Fault.DROP] / 20_000 == pytest.approx(0.05, abs=0.008)
    assert counts[Fault.BAD_JSON] == 0
    first = [FaultInjector(config).draw() for _ in range(2)]
    assert first[0] == first[1]  # same seed, same sequence


def test_server_errors_are_500_502_503() -> None:
    injector = FaultInjector(SimConfig(error_rate=1.0))
    statuses = {injector.draw()[1] for _ in range(200)}
    assert statuses == {500, 502, 503}


def test_fixed_latency() -> None:
    model = LatencyModel(SimConfig(latency_ms=120))
    assert {sample_ms(model, 0.0) for _ in range(10)} == {120.0}


def test_lognormal_latency_matches_p50_and_p99() -> None:
    model = LatencyModel(SimConfig(latency_p50_ms=200, latency_p99_ms=1000, seed=3))
    samples = sorted(sample_ms(model, 0.0) for _ in range(40_000))
    assert statistics.median(samples) == pytest.approx(200, rel=0.04)
    assert samples[int(0.99 * len(samples))] == pytest.approx(1000, rel=0.08)
    config = SimConfig(latency_p50_ms=200, latency_p99_ms=1000, seed=3)
    assert sample_ms(LatencyModel(config), 0.0) == sample_ms(LatencyModel(config), 0.0)


def test_slowdown_above_the_knee() -> None:
    model = LatencyModel(SimConfig(latency_ms=100, knee_rps=10, slowdown_exponent=1.5))
    assert model.slowdown(5.0) == 1.0
    assert model.slowdown(10.0) == 1.0
    assert model.slowdown(40.0) == pytest.approx(8.0)
    assert sample_ms(model, 40.0) == pytest.approx(800.0)
    assert LatencyModel(SimConfig(latency_ms=100)).slowdown(1e6) == 1.0
    assert math.isclose(model.slowdown(20.0), 2**1.5)


def test_latency_grows_past_the_in_flight_knee() -> None:
    model = LatencyModel(SimConfig(latency_ms=100, knee_inflight=50, slowdown_exponent=1.0))
    assert sample_ms(model, 0.0, inflight=50) == 100
    assert sample_ms(model, 0.0, inflight=100) == pytest.approx(200)
