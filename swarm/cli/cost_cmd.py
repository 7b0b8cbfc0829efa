"""``swarm cost REPORT.json | JOB_ID``: what a finished job cost, projected per day and per
month, in USD and CNY, and what it would have cost on every model of the catalog."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from swarm.catalog import load_catalog
from swarm.cli.render import print_json
from swarm.client import SwarmClient
from swarm.cost.projections import DEFAULT_SWARMS_PER_DAY, CostRow, CostTable, cost_table
from swarm.errors import ConfigError, InputError, JobNotFinishedError
from swarm.settings import Settings, load_settings


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
    report = SwarmClient.from_settings(settings).attach(source).report()
    if report is None:
        raise JobNotFinishedError(f"job {source} has not ended yet (no report to price)")
    return report


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


@click.command(name="cost")
@click.argument("source")
@click.option(
    "--swarms-per-day",
    type=click.IntRange(min=1),
    default=DEFAULT_SWARMS_PER_DAY,
    show_default=True,
    help="Swarms a day for the projections.",
)
@click.option(
    "--cny-per-usd",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="CNY per USD (default: SWARM_CNY_PER_USD, 7.3).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the table as JSON.")
def cost_command(
    source: str, swarms_per_day: int, cny_per_usd: float | None, as_json: bool
) -> None:
    """What a finished job (REPORT.json or JOB_ID) cost, and would cost on every model."""
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
