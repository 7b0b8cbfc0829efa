"""--budget-usd's pre-flight prices a deadline job's batch-eligible nodes at the batch price."""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from swarm.catalog import load_catalog
from swarm.client import SwarmClient
from swarm.cost.batch import at_batch_price
from swarm.cost.budget import JobEstimate
from swarm.errors import BudgetExceededError
from swarm.jobs.estimate import estimate_job
from swarm.jobs.queueing import make_celery
from swarm.records import InputItem, JobSpec
from swarm.settings import Settings
from swarm.store import MemoryJobStore

CATALOG = load_catalog()
ITEMS = [InputItem(ref=f"d{i}", text="x" * 4_000) for i in range(20)]


class Stored(Exception):
    """The job passed the pre-flight and reached the store."""


class RefusingStore(MemoryJobStore):
    def create_job(self, spec: JobSpec, texts: Iterable[str], *, chunk: int = 0) -> None:
        raise Stored(spec.job_id)


def client() -> SwarmClient:
    settings = Settings()
    return SwarmClient(settings, CATALOG, RefusingStore(), make_celery(settings, CATALOG))


def test_at_batch_price_halves_the_sub_agents_bound_only() -> None:
    bound = JobEstimate(nodes=2, prompt_tokens=1, completion_tokens=1, subagents_nusd=1001,
                        aggregation_nusd=300)  # fmt: skip
    cheaper = at_batch_price(bound, CATALOG.model("kimi-k2.5"))
    assert (cheaper.subagents_nusd, cheaper.aggregation_nusd) == (501, 300)


def test_a_budget_between_the_batch_and_the_live_bound_passes_with_a_deadline() -> None:
    kimi = CATALOG.model("kimi-k2.5")
    live = estimate_job(ITEMS, "extract", "merge", kimi, kimi)
    batch = at_batch_price(live, kimi)
    budget = (live.total_usd + batch.total_usd) / 2
    with pytest.raises(BudgetExceededError):
        client().submit(ITEMS, "extract", aggregate_instruction="merge", budget_usd=budget)
    with pytest.raises(Stored):
        client().submit(ITEMS, "extract", aggregate_instruction="merge", budget_usd=budget,
                        deadline_s=3600)  # fmt: skip
    with pytest.raises(BudgetExceededError):  # a model without batch: live prices
        client().submit(ITEMS, "extract", aggregate_instruction="merge", budget_usd=budget,
                        deadline_s=3600, model="claude-sonnet-4.5")  # fmt: skip
