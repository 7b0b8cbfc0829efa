"""`swarm`: run, status, jobs, cancel, resume, demo, review, analyze, cost, sim, stack, bench.

Every SwarmError becomes one line on stderr and exit status 2; a job that ends failed,
cancelled or over budget exits 1; a completed job (succeeded or partial) exits 0.

Modules import light: `swarm --help` loads every command module, so each command imports
what it runs (Celery, the OpenAI client, the simulator, the job store) in its body
(tests/unit/cli/test_start_imports.py keeps it so).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from swarm.cli.analyze_cmd import analyze_command
from swarm.cli.bench_cmd import bench_group
from swarm.cli.context_option import context_option
from swarm.cli.cost_cmd import cost_command
from swarm.cli.decorators import (
    CONTEXT_SETTINGS,
    JobFlags,
    SwarmGroup,
    check_job_id,
    check_timeout,
    job_options,
    limit_options,
    one_line_errors,
    resume_options,
)
from swarm.cli.duration import DEADLINE
from swarm.cli.gateway_cmd import gateway_group
from swarm.cli.jobs_cmd import cancel_command, jobs_command
from swarm.cli.probe_cmd import probe_command
from swarm.cli.review_cmd import review_command
from swarm.cli.sim_cmd import sim_command
from swarm.cli.stack_cmd import stack_group
from swarm.errors import ConfigError, InputError
from swarm.jobs.defaults import DEFAULT_AGGREGATE, DEFAULT_INSTRUCTION

if TYPE_CHECKING:
    from swarm.client import SwarmClient


@click.group(cls=SwarmGroup, context_settings=CONTEXT_SETTINGS)
@click.version_option(package_name="swarm")
def main() -> None:
    """Agent swarms over OpenAI-compatible gateways, on Celery and Redis."""


@main.command(short_help="One sub-agent per input file, then the aggregation.")
@click.argument("inputs", nargs=-1)
@click.option("--instruction", default=DEFAULT_INSTRUCTION, help="What each sub-agent does.")
@click.option(
    "--aggregate", "aggregate", default=DEFAULT_AGGREGATE, help="What the aggregation does."
)
@click.option("--model", default=None, help="Catalog model of the sub-agents.")
@click.option("--kind", default="default", show_default=True, help="Task kind (routing table).")
@job_options
@limit_options
@click.option("--skip-empty", is_flag=True, help="Skip empty input files (one line each).")
@click.option(
    "--output-schema",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="JSON Schema file: each sub-agent answers JSON valid against it.",
)
@click.option(
    "--tools",
    default=None,
    help="Make each sub-agent an agent with this toolset: repo, docs, or pkg.module[:attr].",
)
@DEADLINE
@context_option
@one_line_errors
def run(
    inputs: tuple[str, ...],
    instruction: str,
    aggregate: str,
    model: str | None,
    kind: str,
    job: JobFlags,
    max_tokens: int | None,
    force: bool,
    tools: str | None,
    skip_empty: bool,
    output_schema: Path | None,
    deadline_s: float | None,
    context_files: tuple[Path, ...],
) -> None:
    """One sub-agent per INPUT file (- reads one input per line from stdin), then aggregate."""
    from swarm.catalog import load_catalog
    from swarm.cli.context_option import read_context
    from swarm.cli.execute import execute, submitter
    from swarm.cli.inputs import read_inputs, read_schema
    from swarm.jobs.context_fit import check_max_tokens, node_models
    from swarm.settings import load_settings

    settings = load_settings()
    job.check()
    items = read_inputs(inputs, skip_empty=skip_empty, warn=lambda line: click.echo(line, err=True))
    schema = read_schema(output_schema) if output_schema else None
    if not instruction.strip():
        raise InputError("the instruction is empty")
    catalog = load_catalog(settings.config)
    check_max_tokens(max_tokens, node_models(catalog, model, kind))  # unknown model or kind too
    submit = submitter(
        items,
        instruction,
        aggregate,
        model,
        kind,
        job,
        max_tokens=max_tokens,
        force=force,
        tools=tools,
        tool_root=str(Path.cwd()) if tools == "repo" else None,
        output_schema=schema,
        deadline_s=deadline_s,
        context=read_context(context_files),
    )
    execute(settings, submit, job=job)


@main.command(short_help="A whole swarm here: no Redis, no key, simulated gateway.")
@click.option("--inputs", "n_inputs", type=click.IntRange(min=1), default=100, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@one_line_errors
def demo(n_inputs: int, as_json: bool) -> None:
    """A whole swarm on this machine: no Redis, no key, simulated gateway."""
    from swarm.cli.demo_inputs import DEMO_AGGREGATE, DEMO_INSTRUCTION, demo_inputs
    from swarm.cli.execute import run_embedded
    from swarm.cli.render import finish
    from swarm.settings import load_settings

    settings = load_settings(broker_url=None, worker_concurrency=min(n_inputs, 100))
    items = demo_inputs(n_inputs)

    def submit(client: SwarmClient) -> Any:
        return client.submit(
            items, DEMO_INSTRUCTION, aggregate_instruction=DEMO_AGGREGATE, kind="review"
        )

    finish(run_embedded(settings, submit, True, None), as_json)


@main.command(short_help="A job's progress or report (--watch: live); admission counters.")
@click.argument("job_id", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@click.option(
    "--watch", "-w", is_flag=True,
    help="Follow the job live until it ends (Ctrl-C stops watching, not the job), then "
    "print its report.",
)  # fmt: skip
@click.option(
    "--models",
    is_flag=True,
    help="Per-model admission counters (the default "
    "without JOB_ID): admitted, waiting, 429s, rate factor, in flight.",
)
@click.option("--node", "node_id", default=None, help="Print this node's transcript (agents).")
@click.option("--nodes", "list_nodes", is_flag=True, help="A page of the finished job's nodes.")
@click.option("--failed", is_flag=True, help="With --nodes: only the nodes that did not succeed.")
@click.option("--offset", type=click.IntRange(min=0), default=0, help="With --nodes: skip N.")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="With --nodes: N nodes.")
@click.option("--page", type=click.IntRange(min=1), default=None, help="With --nodes: page N.")
@click.option("--jsonl", is_flag=True, help="With --nodes: one node per line (all of them).")
@click.option("--summary", "summary_only", is_flag=True, help="The report without its nodes.")
@one_line_errors
def status(
    job_id: str | None,
    as_json: bool,
    watch: bool,
    models: bool,
    node_id: str | None,
    list_nodes: bool,
    failed: bool,
    offset: int,
    limit: int | None,
    page: int | None,
    jsonl: bool,
    summary_only: bool,
) -> None:
    """Progress of a job, or its final report (the summary for a large job); with --watch,
    the live view of the job until it ends, then its report. Without JOB_ID (or with
    --models), the shared per-model admission counters; with --node, one agent node's
    transcript; with --nodes, a page of its nodes (--jsonl: all, one per line)."""
    from swarm.settings import load_settings

    if job_id is not None:
        check_job_id(job_id)
    settings = load_settings()
    if settings.embedded:
        raise ConfigError("`swarm status` needs SWARM_BROKER_URL (the job store is in Redis)")
    if models or job_id is None:
        from swarm.cli.models_view import show_models

        show_models(settings, as_json)
        if job_id is None:
            return
    from swarm.cli.nodes_view import NodePage
    from swarm.cli.status_view import show_job

    wants_nodes = list_nodes or failed or jsonl
    listed = NodePage(offset, limit, page, failed) if wants_nodes else None
    show_job(settings, job_id, node_id, as_json, watch=watch, nodes=listed, jsonl=jsonl,
             summary_only=summary_only)  # fmt: skip


@main.command(short_help="Run again the sub-agents of an ended job that did not succeed.")
@click.argument("job_id")
@click.option(
    "--budget-usd", type=float, help="A new cap on the job's cost in USD (default: its own)."
)
@resume_options
@one_line_errors
def resume(
    job_id: str,
    budget_usd: float | None,
    as_json: bool,
    no_wait: bool,
    strict: bool,
    timeout_s: float | None,
) -> None:
    """Run again the nodes of an ended job that did not succeed, then aggregate again."""
    from swarm.cli.estimate_line import announce_rerun
    from swarm.cli.execute import broker_client, broker_watch
    from swarm.cli.follow import follow
    from swarm.cli.render import finish
    from swarm.settings import load_settings

    check_job_id(job_id)
    settings = load_settings()
    check_timeout(timeout_s)
    if settings.embedded:
        raise ConfigError("`swarm resume` needs SWARM_BROKER_URL (the job store is in Redis)")
    client = broker_client(settings, strict)
    if client.attach(job_id).status() == "succeeded":
        click.echo(f"swarm: job {job_id} succeeded: nothing to resume", err=True)
        return
    announce_rerun(client, job_id, always=as_json)
    handle = client.resume(job_id, budget_usd=budget_usd)
    if no_wait:
        click.echo(handle.id)
        return
    finish(follow(broker_watch(client, handle.id), timeout_s), as_json)


for command in (
    jobs_command,
    cancel_command,
    cost_command,
    review_command,
    analyze_command,
    sim_command,
    stack_group,
    bench_group,
    probe_command,
    gateway_group,
):
    main.add_command(command)

if __name__ == "__main__":
    main()
