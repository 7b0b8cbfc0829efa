"""The price of a batch call: the live price times the model's ``batch_discount``.

Batch lines are counted in the job's ledger under ``<model>|batch`` (BATCH_LEDGER_SUFFIX),
so the report prices them at the batch price and says what they saved against the live one.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

from swarm.catalog import ModelSpec
from swarm.cost.budget import JobEstimate
from swarm.cost.pricing import cost_nusd, cost_usd
from swarm.records import Usage

BATCH_LEDGER_SUFFIX = "|batch"
"""Ledger model names of batch lines end with this."""


def batch_ledger_name(model: str) -> str:
    """The ledger name of ``model``'s batch lines."""
    return f"{model}{BATCH_LEDGER_SUFFIX}"


def split_ledger_name(name: str) -> tuple[str, bool]:
    """(catalog model, True for batch lines) of a ledger model name."""
    if name.endswith(BATCH_LEDGER_SUFFIX):
        return name.removesuffix(BATCH_LEDGER_SUFFIX), True
    return name, False


def batch_cost_usd(spec: ModelSpec, usage: Usage) -> float:
    """USD of a batch call: the live cost times the discount."""
    return cost_usd(spec, usage) * spec.batch_discount


def batch_cost_nusd(spec: ModelSpec, usage: Usage) -> int:
    """``batch_cost_usd`` in nano-USD, rounded half up (for the budget's counters)."""
    exact = Decimal(cost_nusd(spec, usage)) * Decimal(repr(spec.batch_discount))
    return int(exact.to_integral_value(rounding=ROUND_HALF_UP))


def at_batch_price(estimate: JobEstimate, model: ModelSpec) -> JobEstimate:
    """A job's bound with its sub-agents at ``model``'s batch price (the aggregation stays
    live): the pre-flight of a job whose nodes go into batch files. Its lines expect no
    cache hits (swarm.cost.cache): a batch file is not warmed."""
    exact = Decimal(estimate.subagents_nusd) * Decimal(repr(model.batch_discount))
    nusd = int(exact.to_integral_value(rounding=ROUND_HALF_UP))
    return estimate.model_copy(
        update={"subagents_nusd": nusd, "cached_tokens": 0, "cache_saving_nusd": 0}
    )
