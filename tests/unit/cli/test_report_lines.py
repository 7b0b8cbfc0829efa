"""The report's lines about what was done to a job's inputs and answers."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from rich.console import Console

from swarm.cli.main import main
from swarm.cli.render import print_report

EMBEDDED = {name: None for name in ("SWARM_BROKER_URL", "SWARM_BASE_URL", "SWARM_CONFIG")}


def printed(**fields: Any) -> str:
    report = {
        "job_id": "j", "status": "succeeded", "succeeded": 2, "total": 2, "wall_s": 1.0,
        "final": "", "models": {}, "cost_usd": 0.0,
        "usage": {"prompt_tokens": 0, "cached_tokens": 0, "completion_tokens": 0}, **fields,
    }  # fmt: skip
    out = io.StringIO()
    print_report(report, Console(file=out, width=200))
    return out.getvalue()


def test_inputs_cut_because_of_max_tokens_are_said_to_be() -> None:
    text = printed(inputs_truncated=2, inputs_cut_by_cap=1)
    assert "2 inputs did not fit their model's context (middle summarised)" in text
    assert "1 of them because of max_tokens (--max-tokens)" in text
    assert "because of max_tokens" not in printed(inputs_truncated=2)


def test_a_simulated_jobs_costs_are_marked_simulated() -> None:
    assert "cost USD (simulated)" in printed(simulated=True)
    words = " ".join(printed(simulated=True).split())  # the title wraps at the table's width
    assert "(SIMULATED gateway: nothing was billed)" in words
    assert "simulated" not in printed().lower()


def test_a_simulated_review_says_its_cost_is_simulated() -> None:
    from swarm.jobs.review import review_markdown

    report = {"status": "succeeded", "succeeded": 0, "total": 0, "cost_usd": 0.0042,
              "final": "ok", "nodes": []}  # fmt: skip
    assert "cost $0.0042 (simulated)_" in review_markdown({**report, "simulated": True})
    assert "(simulated)" not in review_markdown(report)


def test_the_cli_marks_a_simulate_run_in_its_json_report(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    path.write_text("an input")
    result = CliRunner().invoke(main, ["run", str(path), "--simulate", "--json"], env=EMBEDDED)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["simulated"] is True
