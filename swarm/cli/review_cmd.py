"""`swarm review REPO`: one sub-agent per commit, a JSON review each, then a summary."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from swarm.cli.decorators import job_options, one_line_errors
from swarm.cli.duration import DEADLINE_HELP, Duration
from swarm.errors import InputError

if TYPE_CHECKING:
    from swarm.client import SwarmClient, SwarmHandle


@click.command("review")
@click.argument("repo", type=click.Path(path_type=Path), default=".")
@click.option("--last", type=click.IntRange(min=1), help="The last N commits of HEAD.")
@click.option("--range", "rev_range", help="A revision range, e.g. main..feature.")
@click.option("--model", default=None, help="Review model (default: the catalog's `review`).")
@click.option(
    "--agent",
    is_flag=True,
    help="Reviewers may read, grep and list the repository at each commit (repo tools).",
)
@click.option("--deadline", "deadline_s", type=Duration(), default=None, help=DEADLINE_HELP)
@job_options
@one_line_errors
def review_command(
    repo: Path,
    last: int | None,
    rev_range: str | None,
    model: str | None,
    agent: bool,
    as_json: bool,
    simulate: bool,
    no_wait: bool,
    budget_usd: float | None,
    strict: bool,
    deadline_s: float | None,
) -> None:
    """Review commits of a git repository (default: the last 10)."""
    from swarm.cli.execute import execute
    from swarm.cli.render import print_review
    from swarm.jobs.review import REVIEW_AGGREGATE, REVIEW_INSTRUCTION, REVIEW_KIND, REVIEW_SCHEMA
    from swarm.settings import load_settings
    from swarm.sources.git import commit_inputs

    if last is not None and rev_range is not None:
        raise InputError("give --last or --range, not both")
    items = commit_inputs(repo, last=last or (None if rev_range else 10), rev_range=rev_range)

    def submit(client: SwarmClient) -> SwarmHandle:
        return client.submit(
            items,
            REVIEW_INSTRUCTION,
            aggregate_instruction=REVIEW_AGGREGATE,
            model=model,
            kind=REVIEW_KIND,
            output_schema=REVIEW_SCHEMA,
            budget_usd=budget_usd,
            tools="repo" if agent else None,
            tool_root=str(repo.resolve()) if agent else None,
            deadline_s=deadline_s,
        )

    execute(
        load_settings(),
        submit,
        simulate=simulate,
        no_wait=no_wait,
        strict=strict,
        as_json=as_json,
        render=print_review,
    )
