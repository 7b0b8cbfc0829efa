"""`swarm cost`'s output: the report it prices (a JSON file, or a job of the store: while
the job runs, what was billed so far) and the cost table on a terminal."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from swarm.catalog import Catalog, load_catalog
from swarm.cli.decorators import check_job_id
from swarm.cli.render import print_json
from swarm.cli.snapshot import JobSnapshot, take_snapshot
from swarm.cost.pricing import usd_text
from swarm.cost.projections import CostRow, CostTable, cost_table
from swarm.errors import ConfigError, InputError
from swarm.jobs.report import model_lines, with_late_billing
from swarm.settings import Settings, load_settings
from swarm.store import JobStore, RedisJobStore


def running_report(store: JobStore, catalog: Catalog, job_id: str) -> dict[str, Any]:
    """What a running job was billed so far, in the report's shape (``status`` running):
    its ledger priced on the catalog."""
    lines = model_lines(catalog, store.ledger(job_id), store.rate_limited(job_id))
    return {
        "job_id": job_id,
        "status": "running",
        "models": {name: line.model_dump(mode="json") for name, line in lines.items()},
        "cost_usd": round(sum(line.cost_usd for line in lines.values()), 6),
    }


def projected_usd(snap: JobSnapshot) -> float | None:
    """The sub-agents' cost once they all ended, at the cost per ended sub-agent so far
    (None before one ended, or once all did); calls in flight and the aggregation are not
    in it."""
    ended, total = snap.finished_nodes, snap.progress.total
    if ended == 0 or ended >= total:
        return None
    return snap.cost_usd / ended * total


def running_line(snap: JobSnapshot) -> str:
    """``job X is running (12 of 40 sub-agents ended): billed so far $0.0123; at this pace
    the sub-agents end near $0.0410 (the aggregation comes on top)``."""
    line = (
        f"job {snap.job_id} is running ({snap.finished_nodes} of {snap.progress.total} "
        f"sub-agents ended, {snap.phase}): billed so far {usd_text(snap.cost_usd)}"
    )
    projected = projected_usd(snap)
    if projected is not None:
        line += f"; at this pace the sub-agents end near {usd_text(projected)} (the aggregation "
        line += "comes on top)"
    return line


def load_report(source: str, settings: Settings) -> tuple[dict[str, Any], JobSnapshot | None]:
    """A report from a JSON file, or from the job store when ``source`` is a job id; while
    that job runs, what it was billed so far and a snapshot of it."""
    if _is_file(Path(source)):
        path = Path(source)
        try:
            data = json.loads(path.read_text("utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InputError(f"cannot read the report {source}: {exc}") from None
        if not isinstance(data, dict):
            raise InputError(f"{source} is not a swarm report (a JSON object)")
        return data, None
    check_job_id(source)
    if settings.embedded:
        raise ConfigError(
            f"{source!r} is not a file, and reading job {source} needs SWARM_BROKER_URL"
        )
    store = RedisJobStore.from_settings(settings)
    spec = store.spec(source)  # JobNotFoundError when unknown
    catalog = load_catalog(settings.config)
    report = store.report(source)
    if report is None:
        return running_report(store, catalog, source), take_snapshot(store, catalog, spec)
    return with_late_billing(report, store.ledger(source), catalog), None


def _is_file(path: Path) -> bool:
    """``path.is_file()``, False for a name the system cannot look up (too long)."""
    try:
        return path.is_file()
    except OSError:
        return False


def _cells(row: CostRow) -> list[str]:
    ratio = "" if row.vs_job is None else f"{row.vs_job:.2f}x"
    amounts = (row.per_swarm_usd, row.per_swarm_cny, row.per_day_usd, row.per_day_cny,
               row.per_month_usd, row.per_month_cny)  # fmt: skip
    return [*(usd_text(amount, sign=False) for amount in amounts), ratio]


def render(table: CostTable, console: Console) -> None:
    """The seeds' table on a terminal."""
    usage = table.usage
    console.print(
        f"[bold]job[/] {table.job_id}  {table.status}  {table.calls} billed calls on "
        f"{', '.join(table.models_used) or 'no model'}: {usage.prompt_tokens:,} prompt "
        f"({usage.cached_tokens:,} cached) + {usage.completion_tokens:,} completion tokens"
        f" ({usage.reasoning_tokens:,} reasoning)"
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
        if (row.label,) != table.models_used:  # a job on one model is its row already
            grid.add_row(row.label, *_cells(row))
    console.print(grid)
    if usage.cached_tokens:
        per_model = ", ".join(
            f"{m} {usd_text(usd)}" for m, usd in table.cache_saved_by_model.items()
        )
        console.print(
            f"prompt cache: {usage.cached_tokens:,} cached tokens billed at the cached price "
            f"saved {usd_text(table.cache_saved_usd)} per swarm ({per_model})"
        )
    if table.batch_calls:
        month = table.batch_saved_usd * table.swarms_per_day * table.days_per_month
        console.print(
            f"batch: {table.batch_calls:,} calls at the batch price saved "
            f"{usd_text(table.batch_saved_usd)} per swarm, {usd_text(month)} per month (the rows "
            "above price every call live)"
        )


def show_cost(source: str, swarms_per_day: int, cny_per_usd: float | None, as_json: bool) -> None:
    """Price the report of ``source`` and print the table (JSON, or rich)."""
    settings = load_settings()
    report, running = load_report(source, settings)
    table = cost_table(
        report,
        load_catalog(settings.config),
        swarms_per_day=swarms_per_day,
        cny_per_usd=cny_per_usd or settings.cny_per_usd,
    )
    if as_json:
        data = table.model_dump(mode="json")
        if running is not None:
            projected = projected_usd(running)
            data["running"] = {
                "ended": running.finished_nodes,
                "total": running.progress.total,
                "phase": running.phase,
                "subagents_projected_usd": None if projected is None else round(projected, 6),
            }
        print_json(data)
        return
    console = Console(width=None if sys.stdout.isatty() else 160)  # a wide table, piped
    if running is not None:
        console.print(running_line(running), markup=False, highlight=False, soft_wrap=True)
    render(table, console)
