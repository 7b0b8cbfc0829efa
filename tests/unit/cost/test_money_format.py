"""One money format: four places whatever the amount's size, two significant digits below
a hundredth of a cent (a simulated job's cost is not shown as $0.0000)."""

from __future__ import annotations

import pytest

from swarm.cli.snapshot import JobSnapshot, plain_line
from swarm.cost.budget import JobEstimate, preflight
from swarm.cost.pricing import usd_text
from swarm.errors import BudgetExceededError
from swarm.store import Progress


@pytest.mark.parametrize(
    ("usd", "text"),
    [
        (0.7819143, "$0.7819"),
        (0.001420, "$0.0014"),
        (0.0294, "$0.0294"),
        (345.678, "$345.6780"),
        (12_528.0, "$12,528.0000"),
        (0.0000423, "$0.000042"),
        (0.0, "$0.0000"),
    ],
)
def test_every_amount_has_one_format(usd: float, text: str) -> None:
    assert usd_text(usd) == text
    assert usd_text(usd, sign=False) == text.removeprefix("$")
    progress = Progress(total=1, done=0, failed=0, in_flight=1, models={})
    snap = JobSnapshot("j1", progress, 1.0, usd, None, False)
    assert plain_line(snap).endswith(f"cost so far {text}")  # the live views' amounts


def test_the_budget_refusal_shows_its_amounts_in_that_format() -> None:
    bound = JobEstimate(
        nodes=3, prompt_tokens=1, completion_tokens=1,
        subagents_nusd=781_914_300, aggregation_nusd=1_420_000,
    )  # fmt: skip
    with pytest.raises(BudgetExceededError) as refused:
        preflight(bound, 0.01, force=False)
    assert "up to $0.7833 (3 sub-agents $0.7819 + aggregation $0.0014)" in str(refused.value)
    assert "exceeds the budget of $0.0100" in str(refused.value)
