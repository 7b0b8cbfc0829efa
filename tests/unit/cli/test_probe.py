"""`swarm probe`: the in-flight suggestion, and the snippet is a catalog that loads."""

from __future__ import annotations

import pytest

from swarm.calls.gateway import make_client
from swarm.calls.probe import (
    Level,
    ProbeResult,
    Round,
    is_local,
    level_of,
    looks_like,
    probe,
    suggest_inflight,
)
from swarm.catalog import parse_catalog
from swarm.cli.probe_cmd import catalog_snippet, report_lines
from swarm.settings import Settings
from swarm.sim import SimConfig, start_in_thread


def levels(*throughputs: float) -> tuple[Level, ...]:
    return tuple(Level(2**i, 0.1, t) for i, t in enumerate(throughputs))


@pytest.mark.parametrize(
    ("throughputs", "inflight"),
    [
        ((10, 10.5, 10.2, 10.1), 1),  # one slot: more in flight only queues
        ((10, 19, 21, 22), 2),  # two slots
        ((10, 20, 40, 80), 8),  # parallel: as far as measured
        ((20, 30, 30, 35), 2),  # two slots, the first level slow
        ((1.34, 1.93, 2.0, 10.78), 8),  # parallel, one level stalled (a loaded machine)
    ],
)
def test_in_flight_is_where_throughput_stops_rising(
    throughputs: tuple[float, ...], inflight: int
) -> None:
    assert suggest_inflight(levels(*throughputs)) == inflight


def test_the_snippet_is_a_catalog_with_zero_prices_for_a_local_server() -> None:
    result = ProbeResult(
        base_url="http://127.0.0.1:8080/v1",
        models=("/models/SmolLM2-135M-Instruct.Q4_1.gguf",),
        model="/models/SmolLM2-135M-Instruct.Q4_1.gguf",
        levels=levels(10, 10, 10, 10),
        inflight=1,
        json_mode=True,
        tool_calls=False,
        context_window=4096,
        kind="local",
        kind_reason="throughput stopped rising at 1 in flight",
    )
    catalog = parse_catalog(catalog_snippet(result))
    spec = catalog.route("review")
    assert spec.context_window == 4096 and spec.max_tokens == 1024 and spec.max_inflight == 1
    assert spec.output_per_mtok_usd == 0 and catalog.backend_of(spec).base_url == result.base_url
    assert "in flight: 1 (throughput stops rising beyond)" in report_lines(result)
    assert catalog.backend_of(spec).kind == "local"
    assert "looks local: throughput stopped rising at 1 in flight" in report_lines(result)


@pytest.mark.parametrize(
    ("throughputs", "kind"),
    [
        ((10, 10.5, 10.2, 10.1), "local"),
        ((10, 19, 21, 22), "local"),
        ((10, 20, 40, 80), "hosted"),
        ((1.34, 1.93, 2.0, 10.78), "hosted"),  # a stalled level is not the server's limit
    ],
)
def test_a_server_whose_throughput_stops_rising_looks_local(
    throughputs: tuple[float, ...], kind: str
) -> None:
    found = levels(*throughputs)
    assert looks_like(found, suggest_inflight(found))[0] == kind


def test_locality() -> None:
    assert is_local("http://127.0.0.1:8080/v1") and is_local("http://10.0.0.5/v1")
    assert not is_local("https://gateway.example.com/v1")


def test_a_levels_throughput_is_its_fastest_rounds() -> None:
    # a client stall makes one round of 8 parallel 0.5 s answers take 1.5 s: the level
    # still reads 16 requests/s, the server's; a server with one slot is slow every round
    stalled = level_of(8, [Round((0.5,) * 7 + (1.5,), 1.5), Round((0.5,) * 8, 0.5)])
    assert (stalled.throughput, stalled.latency_s) == (16.0, 0.5)
    queued = tuple(0.2 * (i + 1) for i in range(8))
    one_slot = level_of(8, [Round(queued, 1.6), Round(queued, 1.7)])
    assert one_slot.throughput == 5.0 and one_slot.latency_s == pytest.approx(0.9)


def test_probe_against_a_one_slot_simulator() -> None:
    # What the probe measures of one slot, in bounds a loaded machine cannot cross (it only
    # makes answers slower): no level answers faster than the slot serves, and 8 at once
    # queue behind each other. What it suggests from such levels is the table above
    # (test_in_flight_is_where_throughput_stops_rising): asserted on the levels measured
    # here, it failed now and then on a loaded machine, the first levels (2 and 4 requests,
    # under a second each) slowed by a stall of this process and a later one not.
    with start_in_thread(SimConfig(latency_ms=200, slots=1)) as sim:
        client = make_client(Settings(), sim.base_url, "k")
        result = probe(client, sim.base_url)
    ceiling = 1 / 0.2  # answers per second of one slot serving each in 200 ms
    assert all(level.throughput <= ceiling * 1.01 for level in result.levels), result.levels
    # a round of 8 is answered 0.2 s apart, the median after 4 or 5 services
    assert result.levels[-1].inflight == 8 and result.levels[-1].latency_s >= 0.8, result.levels
    assert result.models and result.json_mode and result.context_window is None


def test_probe_against_a_parallel_simulator_finds_a_hosted_gateway() -> None:
    # 500 ms answers: the CPU of a round of 8 requests (client and in-process simulator,
    # tens of ms on a loaded machine) stays small beside the wait, so each doubling of the
    # requests in flight still doubles throughput under load (at 200 ms it did not: 10/s at 8)
    with start_in_thread(SimConfig(latency_ms=500)) as sim:
        client = make_client(Settings(), sim.base_url, "k")
        result = probe(client, sim.base_url)
    assert result.kind == "hosted" and result.inflight == 8, result.levels


def test_the_example_catalog_for_local_servers_loads() -> None:
    from pathlib import Path

    from swarm.catalog import load_catalog

    catalog = load_catalog(Path(__file__).resolve().parents[3] / "ops" / "catalog-local.toml")
    spec = catalog.route("default")
    backend = catalog.backend_of(spec)
    assert backend.kind == "local" and backend.is_adaptive and spec.output_per_mtok_usd == 0


def test_probe_of_a_gateway_without_models_probes_the_model_asked() -> None:
    with start_in_thread(SimConfig(latency_ms=5, no_models=True)) as sim:
        client = make_client(Settings(), sim.base_url, "k")
        result = probe(client, sim.base_url, model="kimi-k2.5")
    assert result.models == () and result.model == "kimi-k2.5" and result.json_mode
