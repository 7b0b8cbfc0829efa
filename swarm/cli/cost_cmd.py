"""``swarm cost REPORT.json | JOB_ID``: what a finished job cost, projected per day and per
month, in USD and CNY, and what it would have cost on every model of the catalog."""

from __future__ import annotations

import click

from swarm.cli.decorators import one_line_errors
from swarm.cost.assumptions import DEFAULT_SWARMS_PER_DAY


@click.command(
    name="cost", short_help="What a job cost (so far, while it runs), per day and month."
)
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
@one_line_errors
def cost_command(
    source: str, swarms_per_day: int, cny_per_usd: float | None, as_json: bool
) -> None:
    """What a job (REPORT.json or JOB_ID) cost, and would cost on every model; while the
    job runs, what it was billed so far and, at that pace, what its sub-agents will cost."""
    from swarm.cli.cost_view import show_cost

    show_cost(source, swarms_per_day, cny_per_usd, as_json)
