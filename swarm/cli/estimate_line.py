"""The pre-flight line: a job's cost bound (swarm.jobs.estimate) on stderr before it is
submitted (run, review, analyze) or resumed, when the bound reaches
SWARM_ESTIMATE_NOTICE_USD, and always with --json (a program reading the report on stdout
still sees it on stderr)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from swarm.calls.warmup import warmup_floor
from swarm.catalog import AGGREGATE_KIND, Catalog
from swarm.cli.snapshot import sub_agents
from swarm.client import SwarmClient, agent_bound
from swarm.cost.budget import JobEstimate
from swarm.cost.pricing import usd_of_nusd, usd_text
from swarm.jobs.defaults import DEFAULT_PLANNED_AGGREGATE
from swarm.jobs.estimate import estimate_job, estimate_plan, estimate_rerun
from swarm.jobs.planner import PLAN_ATTEMPTS, PLAN_KIND
from swarm.records import InputItem
from swarm.settings import Settings
from swarm.store import JobStore
from swarm.store.answer_lengths import typical_answers

PLANNED = (
    "if the plan gives each document one sub-task (the plan decides the calls; --budget-usd "
    "caps them while the job runs)"
)
"""What a planned job's bound assumes (swarm.jobs.estimate.estimate_plan)."""


def estimate_text(bound: JobEstimate, *, again: bool = False, assumes: str = "") -> str:
    """``estimate: up to $1.23 for 150 sub-agents ($1.00) and the aggregation ($0.23), ...``

    A planned job's bound names the planner's share first; ``again``: the sub-agents are
    a resume's; ``assumes``: what the bound takes for granted."""
    nodes = usd_of_nusd(bound.subagents_nusd)
    aggregation = usd_of_nusd(bound.aggregation_nusd)
    planner = (
        f"the planner ({usd_text(usd_of_nusd(bound.planner_nusd))}), " if bound.planner_nusd else ""
    )
    rerun = " run again" if again else ""
    assumed = f", {assumes}" if assumes else ""
    cached = (
        f", {bound.cached_tokens:,} prompt tokens expected from the prompt cache (the shared "
        "prefix, warmed by the first call)"
        if bound.cache_saving_nusd
        else ""
    )
    if bound.expected_usd is not None:
        typical = " answers of typical length" if bound.expected_nusd is not None else ""
        return (
            f"estimate: expected ~{usd_text(bound.expected_usd)} ({typical.strip() or 'bound'}"
            f"{cached}), "
            f"at most {usd_text(bound.total_usd)} for {planner}{sub_agents(bound.nodes)}"
            f"{rerun} ({usd_text(nodes)}) and the aggregation ({usd_text(aggregation)})"
            f"{assumed}; the bound prices every prompt uncached and every answer at max_tokens "
            f"({bound.prompt_tokens:,} prompt + {bound.completion_tokens:,} completion tokens "
            "at most)"
        )
    return (
        f"estimate: up to {usd_text(bound.total_usd)} for {planner}{sub_agents(bound.nodes)}"
        f"{rerun} ({usd_text(nodes)}) and the aggregation ({usd_text(aggregation)}){assumed}; "
        "an upper bound "
        f"(every prompt uncached, every answer at max_tokens: {bound.prompt_tokens:,} prompt + "
        f"{bound.completion_tokens:,} completion tokens at most){cached}"
    )


def announce(settings: Settings, bound: JobEstimate, always: bool, **text: Any) -> None:
    """Print ``bound`` on stderr when it reaches the notice threshold or ``always``
    (``text``: estimate_text's options)."""
    if always or bound.total_usd >= settings.estimate_notice_usd:
        click.echo(f"swarm: {estimate_text(bound, **text)}", err=True)


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
    context: str | None = None,
    store: JobStore | None = None,
) -> JobEstimate:
    """Print the job's bound on stderr when it reaches the notice threshold or ``always``,
    with its expected cost (answers of the lengths ``store`` learned, else the catalog's
    share: swarm.store.answer_lengths)."""
    spec_model = catalog.model(model) if model else catalog.route(kind)
    aggregate_model = catalog.route(AGGREGATE_KIND)
    bound = estimate_job(
        items,
        instruction,
        aggregate,
        spec_model,
        aggregate_model,
        max_tokens,
        agent=agent_bound(settings, spec_model, max_tokens, tools),
        context=context,
        warmup_min_tokens=warmup_floor(settings),
        **typical_answers(store, spec_model, None if model else kind, aggregate_model),
    )
    announce(settings, bound, always)
    return bound


def announce_plan(
    client: SwarmClient,
    items: Sequence[InputItem],
    query: str,
    *,
    max_tokens: int | None,
    tools: str | None,
    always: bool,
) -> JobEstimate:
    """The bound of `swarm analyze` (a plan of one sub-task per document), announced."""
    catalog = client.catalog
    planner = catalog.route(PLAN_KIND)
    widest = max(catalog.models.values(), key=lambda m: m.max_tokens)
    bound = estimate_plan(
        items,
        query,
        f"{DEFAULT_PLANNED_AGGREGATE}\n\nQuestion: {query.strip()}",
        catalog,
        planner,
        PLAN_ATTEMPTS,
        max_tokens,
        agent=agent_bound(client.settings, widest, max_tokens, tools),
    )
    announce(client.settings, bound, always, assumes=PLANNED)
    return bound


def announce_rerun(client: SwarmClient, job_id: str, *, always: bool) -> JobEstimate | None:
    """The bound of `swarm resume JOB`: its nodes that did not succeed, run again, and the
    aggregation; None (nothing said) while the job has no report (resume refuses it)."""
    store = client.store
    spec = store.spec(job_id)
    if store.report(job_id) is None:
        return None
    done = {env.node_id for env in store.envelopes(job_id) if env.ok}
    texts = {n: store.input_text(job_id, n) for n in spec.node_ids if n not in done}
    first = client.catalog.model(spec.model)
    bound = estimate_rerun(
        spec,
        texts,
        client.catalog,
        agent=agent_bound(client.settings, first, spec.max_tokens, spec.tools),
    )
    announce(client.settings, bound, always, again=True)
    return bound
