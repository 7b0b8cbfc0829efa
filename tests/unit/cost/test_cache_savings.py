"""What caching saved, per model: in the report's model lines (batch lines at the batch
price: the provider's batch price halves the cached price too) and in `swarm cost`."""

from __future__ import annotations

import pytest

from swarm.catalog import load_catalog
from swarm.cost.batch import batch_ledger_name
from swarm.cost.projections import cost_table
from swarm.jobs.report import model_lines
from swarm.records import Usage
from swarm.store.base import LedgerLine

CATALOG = load_catalog()


def test_each_model_line_says_what_its_cached_tokens_saved() -> None:
    live = Usage(prompt_tokens=400_000, completion_tokens=1000, cached_tokens=300_000)
    batch = Usage(prompt_tokens=200_000, completion_tokens=1000, cached_tokens=100_000)
    lines = model_lines(CATALOG, {
        "kimi-k2.5": LedgerLine(calls=100, usage=live),
        batch_ledger_name("kimi-k2.5"): LedgerLine(calls=50, usage=batch),
        "gpt-4.1": LedgerLine(calls=1, usage=Usage(prompt_tokens=10, completion_tokens=1)),
    })  # fmt: skip
    # kimi: 0.3 M live cached x (1.50 - 0.15) + 0.1 M batch cached x (1.50 - 0.15) x 0.5
    assert lines["kimi-k2.5"].cache_saved_usd == pytest.approx(0.405 + 0.0675)
    assert lines["kimi-k2.5"].cached_tokens == 400_000
    assert lines["gpt-4.1"].cache_saved_usd == 0.0


def test_swarm_cost_splits_the_saving_by_model() -> None:
    report = {
        "job_id": "j", "status": "succeeded", "cost_usd": 1.0,
        "models": {
            "kimi-k2.5": {"calls": 2, "prompt_tokens": 200_000, "completion_tokens": 0,
                          "cached_tokens": 100_000, "cost_usd": 0.5, "cache_saved_usd": 0.135},
            "gpt-4.1": {"calls": 1, "prompt_tokens": 100_000, "completion_tokens": 0,
                        "cached_tokens": 50_000, "cost_usd": 0.5},  # an older report
        },
    }  # fmt: skip
    table = cost_table(report, CATALOG, cny_per_usd=7.3)
    assert table.cache_saved_by_model == {"kimi-k2.5": 0.135, "gpt-4.1": 0.135}
    assert table.cache_saved_usd == pytest.approx(0.27)
