"""The pre-flight line: a job's cost bound (swarm.jobs.estimate) on stderr before it is
submitted, when the bound reaches SWARM_ESTIMATE_NOTICE_USD, and always with --json (a
program reading the report on stdout still sees it on stderr)."""

from __future__ import annotations

from collections.abc import Sequence

import click

from swarm.catalog import AGGREGATE_KIND, Catalog
from swarm.cli.snapshot import sub_agents
from swarm.client import agent_bound
from swarm.cost.budget import JobEstimate
from swarm.cost.pricing import usd_of_nusd
from swarm.jobs.estimate import estimate_job
from swarm.records import InputItem
from swarm.settings import Settings


def estimate_text(bound: JobEstimate) -> str:
    """``estimate: up to $1.23 for 150 sub-agents ($1.00) and the aggregation ($0.23), ...``"""
    nodes = usd_of_nusd(bound.subagents_nusd)
    aggregation = usd_of_nusd(bound.aggregation_nusd)
    return (
        f"estimate: up to ${bound.total_usd:.4f} for {sub_agents(bound.nodes)} "
        f"(${nodes:.4f}) and the aggregation (${aggregation:.4f}); an upper bound (every "
        f"prompt uncached, every answer at max_tokens: {bound.prompt_tokens:,} prompt + "
        f"{bound.completion_tokens:,} completion tokens at most)"
    )


def announce_estimate(
    settings: Settings,
    catalog: Catalog,
    items: Sequence[InputItem],
    instruction: str,
    aggregate: str,
    *,
    model: str | None,
    kind: str,
    max_tokens: int | None,
    tools: str | None,
    always: bool,
) -> JobEstimate:
    """Print the job's bound on stderr when it reaches the notice threshold or ``always``."""
    spec_model = catalog.model(model) if model else catalog.route(kind)
    bound = estimate_job(
        items,
        instruction,
        aggregate,
        spec_model,
        catalog.route(AGGREGATE_KIND),
        max_tokens,
        **agent_bound(settings, spec_model, max_tokens, tools),
    )
    if always or bound.total_usd >= settings.estimate_notice_usd:
        click.echo(f"swarm: {estimate_text(bound)}", err=True)
    return bound
