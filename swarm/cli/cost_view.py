"""`swarm cost`'s output: the report it prices (a JSON file, or a job of the store) and the
cost table on a terminal."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from swarm.catalog import load_catalog
from swarm.cli.render import print_json
from swarm.cost.projections import CostRow, CostTable, cost_table
from swarm.errors import ConfigError, InputError, JobNotFinishedError
from swarm.jobs.report import with_late_billing
from swarm.settings import Settings, load_settings
from swarm.store import RedisJobStore


def load_report(source: str, settings: Settings) -> dict[str, Any]:
    """A report from a JSON file, or from the job store when ``source`` is a job id."""
    path = Path(source)
    if path.is_file():
        try:
            data = json.loads(path.read_text("utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InputError(f"cannot read the report {source}: {exc}") from None
        if not isinstance(data, dict):
            raise InputError(f"{source} is not a swarm report (a JSON object)")
        return data
    if settings.embedded:
        raise ConfigError(
            f"{source!r} is not a file, and reading job {source} needs SWARM_BROKER_URL"
        )
    store = RedisJobStore.from_settings(settings)
    store.spec(source)  # JobNotFoundError when unknown
    report = store.report(source)
    if report is None:
        raise JobNotFinishedError(f"job {source} has not ended yet (no report to price)")
    return with_late_billing(report, store.ledger(source), load_catalog(settings.config))


def _money(value: float, places: int) -> str:
    return f"{value:,.{places}f}"


def _cells(row: CostRow) -> list[str]:
    ratio = "" if row.vs_job is None else f"{row.vs_job:.2f}x"
    return [
        _money(row.per_swarm_usd, 4),
        _money(row.per_swarm_cny, 4),
        _money(row.per_day_usd, 2),
        _money(row.per_day_cny, 2),
        _money(row.per_month_usd, 2),
        _money(row.per_month_cny, 2),
        ratio,
    ]


def render(table: CostTable, console: Console) -> None:
    """The seeds' table on a terminal."""
    usage = table.usage
    console.print(
        f"[bold]job[/] {table.job_id}  {table.status}  {table.calls} billed calls on "
        f"{', '.join(table.models_used) or 'no model'}: {usage.prompt_tokens:,} prompt "
        f"({usage.cached_tokens:,} cached) + {usage.completion_tokens:,} completion tokens"
    )
    grid = Table(
        title=(
            f"cost per swarm, per day at {table.swarms_per_day} swarms, per month "
            f"({table.days_per_month} days); CNY at {table.cny_per_usd:g} per USD"
        )
    )
    grid.add_column("model")
    for head in ("swarm USD", "swarm CNY", "day USD", "day CNY", "month USD", "month CNY"):
        grid.add_column(head, justify="right")
    grid.add_column("vs this job", justify="right")
    grid.add_row(f"[bold]this job ({', '.join(table.models_used)})", *_cells(table.job))
    for row in table.repriced:
        grid.add_row(row.label, *_cells(row))
    console.print(grid)
    if usage.cached_tokens:
        console.print(
            f"prompt cache: {usage.cached_tokens:,} cached tokens billed at the cached price "
            f"saved ${table.cache_saved_usd:.4f} per swarm"
        )
    if table.batch_calls:
        month = table.batch_saved_usd * table.swarms_per_day * table.days_per_month
        console.print(
            f"batch: {table.batch_calls:,} calls at the batch price saved "
            f"${table.batch_saved_usd:.4f} per swarm, ${month:,.2f} per month (the rows "
            "above price every call live)"
        )


def show_cost(source: str, swarms_per_day: int, cny_per_usd: float | None, as_json: bool) -> None:
    """Price the report of ``source`` and print the table (JSON, or rich)."""
    settings = load_settings()
    report = load_report(source, settings)
    table = cost_table(
        report,
        load_catalog(settings.config),
        swarms_per_day=swarms_per_day,
        cny_per_usd=cny_per_usd or settings.cny_per_usd,
    )
    if as_json:
        print_json(table.model_dump(mode="json"))
    else:  # the table is wide: do not squeeze it to 80 columns when piped
        render(table, Console(width=None if sys.stdout.isatty() else 160))
