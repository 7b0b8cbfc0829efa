"""SimConfig validation and the ``swarm sim`` command's option handling."""

from __future__ import annotations

from typing import Any

import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from swarm.cli import sim_cmd
from swarm.sim.config import ModelLimits, SimConfig


def test_defaults_are_unlimited_and_fault_free() -> None:
    config = SimConfig()
    assert config.limits_for("any") == ModelLimits()
    assert config.fault_rate_total() == 0.0
    assert config.latency_ms == 0.0
    assert "kimi-k2.5" in config.models


@pytest.mark.parametrize(
    "kwargs",
    [
        {"error_rate": 1.5},
        {"drop_rate": -0.1},
        {"latency_p50_ms": 100},
        {"latency_p50_ms": 100, "latency_p99_ms": 50},
        {"latency_ms": 5, "latency_p50_ms": 100, "latency_p99_ms": 200},
        {"error_rate": 0.6, "hang_rate": 0.6},
        {"rpm": 0},
        {"unknown": 1},
    ],
)
def test_invalid_configs(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        SimConfig(**kwargs)


def test_config_is_frozen() -> None:
    config = SimConfig()
    with pytest.raises(ValidationError):
        config.rpm = 5


def test_overrides_replace_the_global_limits() -> None:
    config = SimConfig(rpm=10, tpm=1000, model_overrides={"slow": ModelLimits(rpm=2)})
    assert config.limits_for("slow") == ModelLimits(rpm=2)
    assert config.limits_for("fast") == ModelLimits(rpm=10, tpm=1000)


def test_cli_builds_the_config_and_serves(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[SimConfig, str, int]] = []
    monkeypatch.setattr(
        sim_cmd, "serve", lambda config, host, port: calls.append((config, host, port))
    )
    args = ["--port", "0", "--rpm", "30", "--latency-p50-ms", "10", "--latency-p99-ms", "40"]
    result = CliRunner().invoke(sim_cmd.sim_command, [*args, "--error-rate", "0.1"])
    assert result.exit_code == 0, result.output
    config, host, port = calls[0]
    assert (host, port) == ("127.0.0.1", 0)
    assert config.rpm == 30
    assert config.latency_p99_ms == 40
    assert config.error_rate == 0.1
    assert config.latency_ms == 0.0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--latency-p50-ms", "10"], "--latency-p50-ms and --latency-p99-ms must be given"),
        (["--latency-p50-ms", "10", "--latency-p99-ms", "5"], "--latency-p99-ms must be >="),
        (["--error-rate", "2"], "--error-rate: Input should be less than or equal to 1"),
        (["--latency-ms", "5", "--latency-p50-ms", "1", "--latency-p99-ms", "2"], "either"),
        (["--rpm", "0"], "--rpm"),
    ],
)
def test_cli_usage_errors_are_one_line(
    args: list[str], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sim_cmd, "serve", lambda *a, **k: pytest.fail("must not serve"))
    result = CliRunner().invoke(sim_cmd.sim_command, args)
    assert result.exit_code == 2
    error_lines = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(error_lines) == 1
    assert message in error_lines[0]


def test_cli_command_name() -> None:
    assert sim_cmd.sim_command.name == "sim"
