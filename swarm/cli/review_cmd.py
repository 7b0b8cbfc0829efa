"""`swarm review REPO`: one sub-agent per commit, a JSON review each, then a summary."""

from __future__ import annotations

from pathlib import Path

import click

from swarm.cli.context_option import context_option
from swarm.cli.decorators import JobFlags, job_options, limit_options, one_line_errors
from swarm.cli.duration import DEADLINE
from swarm.errors import InputError


@click.command("review", short_help="Review commits of a git repository (default: the last 10).")
@click.argument("repo", type=click.Path(path_type=Path), default=".")
@click.option("--last", type=click.IntRange(min=1), help="The last N commits of HEAD.")
@click.option("--range", "rev_range", help="A revision range, e.g. main..feature.")
@click.option("--model", default=None, help="Review model (default: the catalog's `review`).")
@click.option(
    "--agent",
    is_flag=True,
    help="Reviewers may read, grep and list the repository at each commit (repo tools).",
)
@DEADLINE
@job_options
@limit_options
@context_option
@one_line_errors
def review_command(
    repo: Path,
    last: int | None,
    rev_range: str | None,
    model: str | None,
    agent: bool,
    job: JobFlags,
    deadline_s: float | None,
    max_tokens: int | None,
    force: bool,
    context_files: tuple[Path, ...],
) -> None:
    """Review commits of a git repository (default: the last 10): one reviewer per commit,
    then a summary."""
    from swarm.cli.context_option import conventions, read_context
    from swarm.cli.execute import execute, submitter
    from swarm.cli.render import print_review
    from swarm.jobs.review import REVIEW_AGGREGATE, REVIEW_INSTRUCTION, REVIEW_KIND, REVIEW_SCHEMA
    from swarm.settings import load_settings
    from swarm.sources.git import commit_inputs

    job.check()
    if last is not None and rev_range is not None:
        raise InputError("give --last or --range, not both")
    items = commit_inputs(repo, last=last or (None if rev_range else 10), rev_range=rev_range)
    submit = submitter(
        items,
        REVIEW_INSTRUCTION,
        REVIEW_AGGREGATE,
        model,
        REVIEW_KIND,
        job,
        output_schema=REVIEW_SCHEMA,
        max_tokens=max_tokens,
        force=force,
        tools="repo" if agent else None,
        tool_root=str(repo.resolve()) if agent else None,
        deadline_s=deadline_s,
        # the repository's conventions and the given files: every reviewer's shared prefix
        context=read_context([*conventions(repo), *context_files]),
    )
    execute(load_settings(), submit, job=job, render=print_review)
