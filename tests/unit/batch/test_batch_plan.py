"""Which nodes go into batch files, how files are split, what a batch line costs."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from doubles import job_spec

from swarm.batch.plan import check_deadline, eligible, plan_batches
from swarm.batch.policy import live_reserve_s, poll_countdown_s, switch_at
from swarm.catalog import load_catalog
from swarm.cli.main import main
from swarm.cost.batch import batch_cost_nusd, batch_cost_usd, split_ledger_name
from swarm.cost.pricing import cost_nusd, cost_usd
from swarm.cost.projections import cost_table
from swarm.errors import InputError
from swarm.jobs.report import model_lines
from swarm.records import NodeTask, Usage
from swarm.store.base import LedgerLine

CATALOG = load_catalog()


def test_the_packaged_catalog_says_which_models_batch_and_their_limits() -> None:
    kimi, gpt = CATALOG.model("kimi-k2.5"), CATALOG.model("gpt-4.1")
    assert kimi.batch and gpt.batch and not CATALOG.model("claude-sonnet-4.5").batch
    assert (kimi.batch_discount, kimi.batch_max_bytes) == (0.5, 100_000_000)
    assert set(kimi.batch_refused_fields) == {"temperature", "top_p"}
    assert (gpt.batch_max_lines, gpt.batch_max_bytes) == (50_000, 200_000_000)


def test_without_a_deadline_or_with_tools_nothing_is_eligible() -> None:
    now = time.time()
    assert not eligible(job_spec(2), CATALOG, "n00", now)
    with_tools = job_spec(2, deadline_at=now + 3600, tools="repo")
    assert not eligible(with_tools, CATALOG, "n00", now)
    assert eligible(job_spec(2, deadline_at=now + 3600), CATALOG, "n00", now)


def test_a_deadline_inside_the_live_reserve_runs_live() -> None:
    now = time.time()
    spec = job_spec(2, deadline_at=now + 1.5)
    assert live_reserve_s(spec) == pytest.approx(2.0)
    assert not eligible(spec, CATALOG, "n00", now)


def test_files_hold_one_model_each_split_by_lines_and_bytes() -> None:
    now = time.time()
    tasks = {"n03": NodeTask(model="claude-sonnet-4.5", instruction="x"),
             "n04": NodeTask(model="gpt-4.1", instruction="x")}  # fmt: skip
    small = CATALOG.model("kimi-k2.5").model_copy(update={"batch_max_lines": 2})
    catalog = CATALOG.model_copy(update={"models": {**CATALOG.models, "kimi-k2.5": small}})
    spec = job_spec(6, deadline_at=now + 3600, tasks=tasks)
    planned = plan_batches(spec, catalog, spec.node_ids, {}, now)
    assert planned.live == ("n03",)  # claude has no batch
    assert [(f.index, f.model, f.node_ids) for f in planned.files] == [
        (0, "kimi-k2.5", ("n00", "n01")),
        (1, "kimi-k2.5", ("n02", "n05")),
        (2, "gpt-4.1", ("n04",)),
    ]
    tight = small.model_copy(update={"batch_max_lines": 100, "batch_max_bytes": 3_200})
    catalog = CATALOG.model_copy(update={"models": {**CATALOG.models, "kimi-k2.5": tight}})
    spec = job_spec(4, deadline_at=now + 3600)
    chars = {"n00": 1_000, "n01": 1_000, "n02": 10, "n03": 10}
    planned = plan_batches(spec, catalog, spec.node_ids, chars, now)
    assert [f.node_ids for f in planned.files] == [("n00",), ("n01", "n02", "n03")]


def test_a_deadline_must_be_positive() -> None:
    assert check_deadline(30) == 30.0
    with pytest.raises(InputError):
        check_deadline(0)


def test_polls_come_back_sooner_for_young_batches_and_never_after_the_switch() -> None:
    spec = job_spec(1, deadline_at=time.time() + 1000)
    switch = switch_at(spec)
    assert switch == pytest.approx(spec.deadline_at - 100)  # type: ignore[operator]
    now = spec.submitted_at
    assert poll_countdown_s(now + 1, now, switch) == 0.5
    assert poll_countdown_s(now + 50, now, switch) == pytest.approx(5.0)
    assert poll_countdown_s(now + 500, now, switch) == 30.0
    assert poll_countdown_s(switch - 3, now, switch) == pytest.approx(3.0)


def test_a_batch_line_costs_the_live_price_times_the_discount() -> None:
    kimi = CATALOG.model("kimi-k2.5")
    usage = Usage(prompt_tokens=1_000_003, completion_tokens=777_777)
    assert batch_cost_usd(kimi, usage) == pytest.approx(cost_usd(kimi, usage) * 0.5)
    assert abs(batch_cost_nusd(kimi, usage) - cost_nusd(kimi, usage) / 2) <= 0.5
    assert split_ledger_name("kimi-k2.5|batch") == ("kimi-k2.5", True)


def test_report_lines_fold_batch_calls_into_their_model_with_the_saving() -> None:
    kimi = CATALOG.model("kimi-k2.5")
    live, batch = (
        Usage(prompt_tokens=100, completion_tokens=50),
        Usage(prompt_tokens=4_000, completion_tokens=900),
    )
    ledger = {"kimi-k2.5": LedgerLine(calls=1, usage=live),
              "kimi-k2.5|batch": LedgerLine(calls=9, usage=batch)}  # fmt: skip
    line = model_lines(CATALOG, ledger)["kimi-k2.5"]
    assert (line.calls, line.batch_calls) == (10, 9)
    assert line.prompt_tokens == 4_100
    expected = cost_usd(kimi, live) + 0.5 * cost_usd(kimi, batch)
    assert line.cost_usd == pytest.approx(expected, abs=1e-6)
    assert line.saved_usd == pytest.approx(0.5 * cost_usd(kimi, batch), abs=1e-6)
    only_batch = model_lines(CATALOG, {"kimi-k2.5|batch": LedgerLine(calls=2, usage=batch)})
    assert only_batch["kimi-k2.5"].calls == 2


def test_swarm_cost_projects_the_batch_saving(tmp_path: Path) -> None:
    report = {
        "job_id": "j", "status": "succeeded", "cost_usd": 0.4,
        "models": {"kimi-k2.5": {"calls": 101, "prompt_tokens": 412_000,
                                 "completion_tokens": 196_000, "cached_tokens": 0,
                                 "cost_usd": 0.4, "batch_calls": 100, "saved_usd": 0.33}},
    }  # fmt: skip
    table = cost_table(report, CATALOG, swarms_per_day=10, cny_per_usd=7.3)
    assert (table.batch_calls, table.batch_saved_usd) == (100, 0.33)
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report))
    out = CliRunner().invoke(
        main, ["cost", str(path), "--swarms-per-day", "10"], terminal_width=200
    )
    assert out.exit_code == 0, out.output
    assert "batch: 100 calls at the batch price saved $0.3300 per swarm, $99.0000 per month" in (
        " ".join(out.output.split())
    )
