"""Budget validation, cost bounds and the pre-flight check (pure functions)."""

from __future__ import annotations

import math

import pytest
from click.testing import CliRunner

from swarm.catalog import AGGREGATE_KIND, load_catalog
from swarm.cli.main import main
from swarm.cost.budget import (
    call_bound_nusd,
    check_budget,
    preflight,
    prompt_estimate,
)
from swarm.cost.pricing import cost_nusd, cost_usd, nusd_of_usd
from swarm.errors import BudgetExceededError, InputError
from swarm.jobs.estimate import estimate_job, estimate_plan, estimate_rerun
from swarm.jobs.plan_schema import plannable_kinds
from swarm.jobs.prompts import subagent_messages
from swarm.records import InputItem, JobSpec, Usage
from swarm.store.billing import BudgetState, admits

CATALOG = load_catalog()
KIMI = CATALOG.model("kimi-k2.5")
DEEPSEEK = CATALOG.model("deepseek-v3.2")


@pytest.mark.parametrize("bad", [0, -1.0, math.nan, math.inf])
def test_a_budget_must_be_positive_and_finite(bad: float) -> None:
    with pytest.raises(InputError, match="positive amount of USD"):
        check_budget(bad)
    check_budget(None)
    check_budget(0.01)


def test_nano_usd_is_exact() -> None:
    # deepseek: 0.26 input, 0.026 cached input, 0.42 output USD per million tokens, that is
    # 260, 26 and 420 nano-USD per token: 1,000 uncached + 500 cached + 1,000 output.
    usage = Usage(prompt_tokens=1_500, completion_tokens=1_000, cached_tokens=500)
    assert cost_nusd(DEEPSEEK, usage) == 1_000 * 260 + 500 * 26 + 1_000 * 420
    assert cost_nusd(DEEPSEEK, usage) / 1e9 == pytest.approx(cost_usd(DEEPSEEK, usage))
    assert nusd_of_usd(0.1) == 100_000_000 and nusd_of_usd(4.17) == 4_170_000_000


def test_call_bound_is_prompt_uncached_plus_max_tokens() -> None:
    # kimi: 1,000 x 1.50 + 2,048 x 0.60 per million = 0.0015 + 0.0012288 USD
    assert call_bound_nusd(KIMI, 1_000, 2_048) == 1_500_000 + 1_228_800


def test_job_estimate_and_preflight() -> None:
    items = [InputItem(ref=f"f{i}.py", text="x = 1\n" * 50) for i in range(10)]
    bound = estimate_job(items, "find bugs", "merge", DEEPSEEK, KIMI, max_tokens=100)
    prompt = prompt_estimate(
        m["content"] for m in subagent_messages("find bugs", "f0.py", items[0].text)
    )
    assert bound.nodes == 10
    assert bound.subagents_nusd == 10 * call_bound_nusd(DEEPSEEK, prompt, 100)
    # The aggregation quotes at most 10 results of 100 tokens (plus tags) and may answer
    # with the aggregate model's whole max_tokens.
    assert bound.aggregation_nusd > call_bound_nusd(KIMI, 10 * 100, KIMI.max_tokens)
    assert bound.completion_tokens == 10 * 100 + KIMI.max_tokens
    preflight(bound, bound.total_usd, force=False)  # exactly the bound fits
    preflight(bound, None, force=False)
    with pytest.raises(BudgetExceededError, match=r"exceeds the budget of \$0\.0001") as err:
        preflight(bound, 0.0001, force=False)
    assert "\n" not in str(err.value)
    preflight(bound, 0.0001, force=True)


def test_aggregation_prompt_bound_stays_inside_the_context_window() -> None:
    items = [InputItem(ref=f"i{i}", text="y") for i in range(2_000)]
    bound = estimate_job(items, "i", "a", KIMI, KIMI)
    cap = KIMI.context_window - KIMI.max_tokens
    assert bound.aggregation_nusd == call_bound_nusd(KIMI, cap, KIMI.max_tokens)


def test_a_plan_bound_counts_every_planner_attempt_and_the_priciest_route() -> None:
    items = [InputItem(ref=f"d{i}.md", text="z " * 300) for i in range(3)]
    planner = CATALOG.route("plan")
    once = estimate_plan(items, "Which?", "merge", CATALOG, planner, 1, max_tokens=64)
    twice = estimate_plan(items, "Which?", "merge", CATALOG, planner, 2, max_tokens=64)
    assert twice.planner_nusd == 2 * once.planner_nusd > 0
    assert twice.total_usd > once.total_usd and twice.subagents_nusd == once.subagents_nusd
    prompt = prompt_estimate(
        m["content"] for m in subagent_messages("Which?", "d0.md", items[0].text)
    )
    routes = {CATALOG.route(kind) for kind in plannable_kinds(CATALOG)}
    priciest = max(call_bound_nusd(model, prompt, 64) for model in routes)
    assert once.nodes == 3 and once.subagents_nusd == 3 * priciest
    assert once.aggregation_nusd > 0 and CATALOG.route(AGGREGATE_KIND).max_tokens > 0


def test_a_rerun_bound_counts_the_nodes_run_again_and_the_whole_aggregation() -> None:
    spec = JobSpec(
        job_id="j", instruction="find bugs", aggregate_instruction="merge", model=DEEPSEEK.name,
        aggregate_model=KIMI.name, node_ids=("n0", "n1", "n2"), input_refs=("a", "b", "c"),
        submitted_at=0.0, max_tokens=100,
    )  # fmt: skip
    again = estimate_rerun(spec, {"n1": "x = 1\n" * 50}, CATALOG)
    prompt = prompt_estimate(
        m["content"] for m in subagent_messages("find bugs", "b", "x = 1\n" * 50)
    )
    assert again.nodes == 1 and again.subagents_nusd == call_bound_nusd(DEEPSEEK, prompt, 100)
    every = estimate_job(
        [InputItem(ref=r, text="x = 1\n" * 50) for r in "abc"], "find bugs", "merge",
        DEEPSEEK, KIMI, max_tokens=100,
    )  # fmt: skip
    assert again.aggregation_nusd == every.aggregation_nusd  # it quotes all three results
    assert estimate_rerun(spec, {}, CATALOG).subagents_nusd == 0


@pytest.mark.parametrize(
    ("state", "amount", "closing", "ok"),
    [
        (BudgetState(), 10**12, False, True),  # no cap
        (BudgetState(cap_nusd=100, spent_nusd=50, reserved_nusd=30), 20, False, True),
        (BudgetState(cap_nusd=100, spent_nusd=50, reserved_nusd=30), 21, False, False),
        (BudgetState(cap_nusd=100, exhausted=True), 1, False, False),
        (BudgetState(cap_nusd=100, spent_nusd=60, exhausted=True), 40, True, True),
        (BudgetState(cap_nusd=100, spent_nusd=61, exhausted=True), 40, True, False),
    ],
)
def test_admits(state: BudgetState, amount: int, closing: bool, ok: bool) -> None:
    assert admits(state, amount, closing=closing) is ok


@pytest.mark.parametrize("bad", ["0", "-1", "nan"])
def test_cli_rejects_a_bad_budget_in_one_line(bad: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SWARM_BROKER_URL", raising=False)
    out = CliRunner().invoke(main, ["run", "-", "--simulate", "--budget-usd", bad], input="x\n")
    assert out.exit_code == 2 and out.output.startswith(
        "swarm: the budget must be a positive amount of USD"
    )
    assert out.output.count("\n") == 1
