"""`swarm cost`: the seeds' table, checked against figures computed by hand from the catalog."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from swarm.catalog import load_catalog
from swarm.cli.main import main
from swarm.cost.projections import cost_table
from swarm.errors import InputError

# Seed 000's swarm: 412K input + 196K output tokens on Kimi K2.5 (1.50 in / 0.60 out per M):
# 0.412 x 1.50 + 0.196 x 0.60 = 0.618 + 0.1176 = 0.7356 USD.
SEED_JOB: dict[str, Any] = {
    "job_id": "seed000",
    "status": "succeeded",
    "cost_usd": 0.7356,
    "models": {
        "kimi-k2.5": {
            "calls": 101,
            "prompt_tokens": 412_000,
            "completion_tokens": 196_000,
            "cached_tokens": 0,
            "cost_usd": 0.7356,
        }
    },
}

# The same tokens on each catalog model, by hand (USD per swarm):
HAND_REPRICED = {
    "kimi-k2.5": 0.618 + 0.1176,  # 1.50 / 0.60
    "gemini-2.5-flash": 0.412 * 0.30 + 0.196 * 2.50,  # 0.1236 + 0.49 = 0.6136
    "claude-sonnet-4.5": 0.412 * 3.00 + 0.196 * 15.00,  # 1.236 + 2.94 = 4.176
    "gpt-4.1": 0.412 * 3.00 + 0.196 * 8.00,  # 1.236 + 1.568 = 2.804
    "deepseek-v3.2": 0.412 * 0.26 + 0.196 * 0.42,  # 0.10712 + 0.08232 = 0.18944
}


def test_seed_table_per_swarm_day_month_usd_and_cny() -> None:
    table = cost_table(SEED_JOB, load_catalog(), swarms_per_day=100, cny_per_usd=7.3)
    job = table.job
    assert job.per_swarm_usd == pytest.approx(0.7356)
    assert job.per_day_usd == pytest.approx(73.56)
    assert job.per_month_usd == pytest.approx(2206.80)  # 3,000 swarms a month
    assert job.per_swarm_cny == pytest.approx(5.36988)
    assert job.per_day_cny == pytest.approx(536.988)
    assert job.per_month_cny == pytest.approx(16109.64)
    assert table.calls == 101 and table.usage.prompt_tokens == 412_000
    rows = {row.label: row for row in table.repriced}
    assert set(rows) == set(HAND_REPRICED)
    for name, usd in HAND_REPRICED.items():
        assert rows[name].per_swarm_usd == pytest.approx(usd), name
        assert rows[name].per_month_usd == pytest.approx(usd * 3000), name
        assert rows[name].vs_job == pytest.approx(usd / 0.7356), name
    # Seed 000: Claude Sonnet 4.5 costs ~$12.5K a month at 100 swarms a day, Kimi ~$2.2K.
    assert rows["claude-sonnet-4.5"].per_month_usd == pytest.approx(12528.0)
    assert rows["claude-sonnet-4.5"].per_month_cny == pytest.approx(12528.0 * 7.3)


def test_cached_tokens_are_priced_at_the_cached_price() -> None:
    line = {**SEED_JOB["models"]["kimi-k2.5"], "cached_tokens": 100_000}
    # 312K uncached x 1.50 + 100K cached x 0.15 + 196K x 0.60 = 0.468 + 0.015 + 0.1176
    report = {**SEED_JOB, "cost_usd": 0.6006, "models": {"kimi-k2.5": line}}
    table = cost_table(report, load_catalog(), swarms_per_day=10, cny_per_usd=1.0)
    rows = {row.label: row for row in table.repriced}
    assert rows["kimi-k2.5"].per_swarm_usd == pytest.approx(0.6006)
    assert table.cache_saved_usd == pytest.approx(0.1 * (1.50 - 0.15))
    assert table.job.per_day_usd == pytest.approx(6.006)
    # claude: 0.312 x 3 + 0.1 x 0.30 + 0.196 x 15
    assert rows["claude-sonnet-4.5"].per_swarm_usd == pytest.approx(0.936 + 0.03 + 2.94)


def test_not_a_report_is_one_input_error() -> None:
    with pytest.raises(InputError, match="not a swarm report"):
        cost_table({"job_id": "x"}, load_catalog(), cny_per_usd=7.3)


def test_cli_cost_of_a_report_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SWARM_BROKER_URL", raising=False)
    monkeypatch.setenv("SWARM_CNY_PER_USD", "7.3")
    path = tmp_path / "report.json"
    path.write_text(json.dumps(SEED_JOB))
    runner = CliRunner()
    out = runner.invoke(main, ["cost", str(path), "--json", "--swarms-per-day", "100"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["job"]["per_month_cny"] == pytest.approx(16109.64)
    assert data["swarms_per_day"] == 100 and data["days_per_month"] == 30
    text = runner.invoke(main, ["cost", str(path)], terminal_width=200)
    assert text.exit_code == 0, text.output
    assert "claude-sonnet-4.5" in text.output and "4.1760" in text.output
    assert "12,528.00" in text.output and "2,206.80" in text.output


def test_cli_cost_errors_are_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SWARM_BROKER_URL", raising=False)
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    runner = CliRunner()
    out = runner.invoke(main, ["cost", str(bad)])
    assert out.exit_code == 2 and out.output.startswith("swarm: ") and out.output.count("\n") == 1
    missing = runner.invoke(main, ["cost", "0123abcd"])
    assert missing.exit_code == 2 and "SWARM_BROKER_URL" in missing.output


def test_a_job_on_one_model_is_one_row_of_the_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SWARM_BROKER_URL", raising=False)
    path = tmp_path / "report.json"
    path.write_text(json.dumps(SEED_JOB))
    text = CliRunner().invoke(main, ["cost", str(path)], terminal_width=200).output
    rows = [line for line in text.splitlines() if "kimi-k2.5" in line and "│" in line]
    assert len(rows) == 1 and "this job (kimi-k2.5)" in rows[0], text
    assert any("claude-sonnet-4.5" in line for line in text.splitlines())
