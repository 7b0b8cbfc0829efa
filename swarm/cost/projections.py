"""The seeds' cost table for a finished job: per swarm, per day, per month, USD and CNY,
and the same job re-priced on every model of the catalog.

Pure computation over a report (its ``models`` lines) and the catalog; `swarm cost`
prints it. Re-pricing keeps the job's token counts, cached share included (it assumes the
other model's gateway caches the same prefix), and prices them on one model, so the rows
show what routing saved (or would save) against running everything on that model.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field

from swarm.catalog import Catalog
from swarm.cost.assumptions import DAYS_PER_MONTH, DEFAULT_SWARMS_PER_DAY
from swarm.cost.cache import cache_saved_usd
from swarm.cost.pricing import cost_usd
from swarm.errors import InputError
from swarm.records import Frozen, Usage


class CostRow(Frozen):
    """One line of the table: a job's cost on some model, projected."""

    label: str
    """``this job`` for the real bill, else a catalog model name."""
    per_swarm_usd: float
    per_day_usd: float
    per_month_usd: float
    per_swarm_cny: float
    per_day_cny: float
    per_month_cny: float
    vs_job: float | None
    """This row's cost divided by the job's real cost (None when the job cost nothing)."""


class CostTable(Frozen):
    """Everything `swarm cost` shows."""

    job_id: str
    status: str
    calls: int
    """Billed calls, every model."""
    usage: Usage
    """Tokens of every billed call."""
    models_used: tuple[str, ...]
    """Models the job really called."""
    swarms_per_day: int
    days_per_month: int
    cny_per_usd: float
    cache_saved_usd: float
    """What the cached tokens saved against paying their full input price."""
    cache_saved_by_model: dict[str, float] = Field(default_factory=dict)
    """The same per model (models whose cached tokens saved something)."""
    batch_saved_usd: float = 0.0
    """What the batch calls saved against the live price (the models' ``saved_usd``)."""
    batch_calls: int = 0
    """Calls billed at a batch price (a job with a deadline, swarm.batch)."""
    job: CostRow
    """The real bill, projected."""
    repriced: tuple[CostRow, ...]
    """The job on each catalog model, in catalog order."""


def _row(label: str, usd: float, job_usd: float, per_day: int, cny: float) -> CostRow:
    day, month = usd * per_day, usd * per_day * DAYS_PER_MONTH
    return CostRow(
        label=label,
        per_swarm_usd=money(usd),
        per_day_usd=money(day),
        per_month_usd=money(month),
        per_swarm_cny=money(usd * cny),
        per_day_cny=money(day * cny),
        per_month_cny=money(month * cny),
        vs_job=usd / job_usd if job_usd > 0 else None,
    )


MONEY_DECIMALS = 6
"""Amounts are shown to a millionth (a micro-dollar); more digits are float noise."""


def money(amount: float) -> float:
    """``amount`` rounded to MONEY_DECIMALS (0.7681790000000001 -> 0.768179)."""
    return round(amount, MONEY_DECIMALS)


def _usage_of(line: Mapping[str, Any]) -> Usage:
    return Usage(
        prompt_tokens=int(line.get("prompt_tokens", 0)),
        completion_tokens=int(line.get("completion_tokens", 0)),
        cached_tokens=int(line.get("cached_tokens", 0)),
        reasoning_tokens=int(line.get("reasoning_tokens", 0)),
    )


def _cache_saved_by_model(
    catalog: Catalog, models: Mapping[str, Mapping[str, Any]]
) -> dict[str, float]:
    """Each model's cache saving: the report's own figure (batch lines at the batch price),
    else its cached tokens at the input price less the cached price (an older report)."""
    saved: dict[str, float] = {}
    for name, line in models.items():
        spec = catalog.models.get(name)
        if "cache_saved_usd" in line:
            saved[name] = float(line["cache_saved_usd"])
        elif spec is not None:
            saved[name] = cache_saved_usd(spec, _usage_of(line))
    return {name: money(usd) for name, usd in saved.items() if usd}


def cost_table(
    report: Mapping[str, Any],
    catalog: Catalog,
    *,
    swarms_per_day: int = DEFAULT_SWARMS_PER_DAY,
    cny_per_usd: float,
) -> CostTable:
    """The table for ``report`` (a report dict, as `--json` prints it)."""
    try:
        models: Mapping[str, Mapping[str, Any]] = report["models"]
        job_usd = float(report["cost_usd"])
        job_id, status = str(report["job_id"]), str(report["status"])
    except (KeyError, TypeError, ValueError):
        raise InputError("not a swarm report (needs job_id, status, cost_usd and models)") from None
    usage = sum((_usage_of(line) for line in models.values()), Usage())
    cache_by_model = _cache_saved_by_model(catalog, models)
    rows = tuple(
        _row(name, cost_usd(spec, usage), job_usd, swarms_per_day, cny_per_usd)
        for name, spec in catalog.models.items()
    )
    return CostTable(
        job_id=job_id,
        status=status,
        calls=sum(int(line.get("calls", 0)) for line in models.values()),
        usage=usage,
        models_used=tuple(name for name, line in models.items() if line.get("calls")),
        swarms_per_day=swarms_per_day,
        days_per_month=DAYS_PER_MONTH,
        cny_per_usd=cny_per_usd,
        cache_saved_usd=money(sum(cache_by_model.values())),
        cache_saved_by_model=cache_by_model,
        batch_saved_usd=money(sum(float(line.get("saved_usd", 0.0)) for line in models.values())),
        batch_calls=sum(int(line.get("batch_calls", 0)) for line in models.values()),
        job=_row("this job", job_usd, job_usd, swarms_per_day, cny_per_usd),
        repriced=rows,
    )
