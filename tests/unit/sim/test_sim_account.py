"""The simulator's account options and refusals (swarm.sim.account), without a server."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from swarm.cli import sim_cmd
from swarm.sim.account import Account, AccountConfig
from swarm.sim.config import SimConfig


def test_cli_account_options_reach_the_config(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[SimConfig] = []
    monkeypatch.setattr(sim_cmd, "serve", lambda config, host, port: calls.append(config))
    args = ["--port", "0", "--balance-answers", "5", "--error-format", "deepseek"]
    result = CliRunner().invoke(sim_cmd.sim_command, args)
    assert result.exit_code == 0, result.output
    assert calls[0].account == AccountConfig(balance_answers=5, error_format="deepseek")
    assert SimConfig().account.balance_answers is None  # unlimited by default


def test_the_balance_pays_for_n_answers_then_refuses_with_the_quota_error() -> None:
    account = Account(AccountConfig(balance_answers=1))
    assert account.refusal("hi") is None
    account.answered()
    refused = account.refusal("hi")
    assert refused is not None and refused[0] == 429
    assert refused[1]["error"]["type"] == "exceeded_current_quota_error"
    assert account.snapshot()["first_refusal_at"] == 2


def test_an_unknown_marker_is_served() -> None:
    assert Account(AccountConfig()).refusal("[[sim:provider_error=nonsense]]") is None
