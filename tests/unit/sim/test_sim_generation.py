"""Generation mode: time to first token plus tokens at a steady rate, the answer's length
from the request, and errors that skip the answer latency."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from swarm.cli import sim_cmd
from swarm.sim.config import SimConfig
from swarm.sim.content import make_completion, parse_chat_request
from swarm.sim.faults import FaultInjector, LatencyModel, Markers, parse_markers, plan_request


def test_the_answer_tokens_directive_is_parsed() -> None:
    assert parse_markers("x [[sim:answer_tokens=1500]]") == Markers(answer_tokens=1500)
    assert parse_markers("x [[sim:answer_tokens=0]]") == Markers()
    assert parse_markers("x [[sim:answer_tokens]]") == Markers()


def test_an_answer_takes_the_first_token_plus_its_tokens_at_the_rate() -> None:
    config = SimConfig(ttft_ms=1800, tokens_per_s=80)
    plan = plan_request(
        parse_markers("[[sim:answer_tokens=1500]]"),
        FaultInjector(config),
        LatencyModel(config),
        0.0,
    )
    assert plan.answer_tokens == 1500
    assert plan.latency_s == pytest.approx(1.8)
    assert plan.answer_delay_s(20) == pytest.approx(1.8 + 20 / 80)
    assert plan.answer_delay_s(1500) == pytest.approx(1.8 + 1500 / 80)


def test_either_generation_field_alone_counts_the_other_as_zero() -> None:
    only_rate = SimConfig(tokens_per_s=100)
    plan = plan_request(Markers(), FaultInjector(only_rate), LatencyModel(only_rate), 0.0)
    assert plan.answer_delay_s(50) == pytest.approx(0.5)
    only_ttft = SimConfig(ttft_ms=300)
    plan = plan_request(Markers(), FaultInjector(only_ttft), LatencyModel(only_ttft), 0.0)
    assert plan.answer_delay_s(50) == pytest.approx(0.3)


def test_the_load_slowdown_stretches_first_token_and_rate_alike() -> None:
    config = SimConfig(ttft_ms=100, tokens_per_s=100, knee_rps=10, slowdown_exponent=1.0)
    plan = plan_request(Markers(), FaultInjector(config), LatencyModel(config), 20.0)
    assert plan.answer_delay_s(100) == pytest.approx(2 * (0.1 + 1.0))


def test_a_latency_marker_is_exact_whatever_the_answer_length() -> None:
    config = SimConfig(ttft_ms=1000, tokens_per_s=10)
    plan = plan_request(
        parse_markers("[[sim:latency_ms=20]]"), FaultInjector(config), LatencyModel(config), 0.0
    )
    assert plan.answer_delay_s(500) == pytest.approx(0.02)


def test_the_other_modes_keep_one_latency_for_any_length() -> None:
    config = SimConfig(latency_ms=200)
    plan = plan_request(Markers(), FaultInjector(config), LatencyModel(config), 0.0)
    assert plan.answer_delay_s(10) == plan.answer_delay_s(2000) == pytest.approx(0.2)


def test_errors_come_back_at_once_in_generation_mode_and_on_request_elsewhere() -> None:
    assert SimConfig(ttft_ms=200, tokens_per_s=80).errors_at_once
    assert not SimConfig(ttft_ms=200, fast_errors=False).errors_at_once
    assert not SimConfig(latency_ms=200).errors_at_once
    assert SimConfig(latency_ms=200, fast_errors=True).errors_at_once
    assert not SimConfig().generation


@pytest.mark.parametrize(
    ("asked", "cap", "tokens", "finish"),
    [(1500, 2048, 1500, "stop"), (1500, 247, 247, "length"), (1500, None, 1500, "stop")],
)
def test_the_asked_length_is_cut_at_max_tokens(
    asked: int, cap: int | None, tokens: int, finish: str
) -> None:
    request = parse_chat_request(
        {
            "model": "m",
            "messages": [{"role": "user", "content": f"x [[sim:answer_tokens={asked}]]"}],
            **({"max_tokens": cap} if cap is not None else {}),
        }
    )
    completion = make_completion(request, answer_tokens=asked)
    assert (completion.completion_tokens, completion.finish_reason) == (tokens, finish)
    assert abs(len(completion.content) / 4 - tokens) < 15


@pytest.mark.parametrize(
    "kwargs",
    [
        {"ttft_ms": 100, "latency_ms": 50},
        {"tokens_per_s": 80, "latency_p50_ms": 10, "latency_p99_ms": 20},
        {"tokens_per_s": 0},
        {"ttft_ms": -1},
    ],
)
def test_generation_does_not_mix_with_the_other_latencies(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValidationError):
        SimConfig(**kwargs)


def test_cli_flags_reach_the_config(monkeypatch: pytest.MonkeyPatch) -> None:
    configs: list[SimConfig] = []
    monkeypatch.setattr(sim_cmd, "serve", lambda config, host, port: configs.append(config))
    args = ["--ttft-ms", "1800", "--tokens-per-s", "80", "--no-models", "--no-fast-errors"]
    result = CliRunner().invoke(sim_cmd.sim_command, args)
    assert result.exit_code == 0, result.output
    config = configs[0]
    assert (config.ttft_ms, config.tokens_per_s, config.no_models) == (1800, 80, True)
    assert config.fast_errors is False and not config.errors_at_once
    result = CliRunner().invoke(sim_cmd.sim_command, ["--latency-ms", "200", "--fast-errors"])
    assert result.exit_code == 0, result.output
    assert configs[1].errors_at_once and not configs[1].generation


def test_cli_refuses_two_latency_models_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sim_cmd, "serve", lambda *a, **k: pytest.fail("must not serve"))
    result = CliRunner().invoke(sim_cmd.sim_command, ["--latency-ms", "5", "--ttft-ms", "100"])
    assert result.exit_code == 2
    assert "--ttft-ms/--tokens-per-s" in result.output
