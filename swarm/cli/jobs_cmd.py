"""``swarm jobs`` (the jobs submitted last, from the job store's index) and ``swarm cancel
JOB`` (SwarmHandle.cancel)."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

import click

from swarm.cli.decorators import check_job_id, one_line_errors

if TYPE_CHECKING:
    from swarm.catalog import Catalog
    from swarm.store import JobStore

CANCEL_EFFECT = (
    "sub-agents that have not called the gateway yet end as cancelled without calling it "
    "(queued ones when a worker takes them); calls already in flight finish and are billed; "
    "the aggregation is not called unless it has started; the report (status cancelled) "
    "keeps every answer that came back"
)
"""What a cancel stops and what it does not (swarm.client.SwarmHandle.cancel)."""


@click.command("jobs", short_help="The jobs submitted last: status, progress, cost, age.")
@click.option(
    "--limit", "-n", type=click.IntRange(min=1), default=20, show_default=True,
    help="How many jobs (newest first).",
)  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
@one_line_errors
def jobs_command(limit: int, as_json: bool) -> None:
    """The jobs submitted last, newest first: id, status, sub-agents done of total, cost so
    far and age. Jobs are listed while their data lives in Redis (SWARM_RESULT_EXPIRES_S)."""
    from swarm.cli.jobs_view import show_jobs
    from swarm.settings import load_settings

    show_jobs(load_settings(), limit, as_json)


@click.command("cancel", short_help="Cancel a running job (calls in flight still finish).")
@click.argument("job_id")
@click.option("--wait", is_flag=True, help="Wait for the cancelled job's report.")
@click.option(
    "--json", "as_json", is_flag=True,
    help="Print JSON on stdout (with --wait, the report), the explanation on stderr.",
)  # fmt: skip
@one_line_errors
def cancel_command(job_id: str, wait: bool, as_json: bool) -> None:
    """Cancel JOB_ID: its sub-agents that have not called the gateway yet end as cancelled
    without calling it; calls already in flight finish and are billed; the aggregation is
    not called unless it has started. Exit status 0 when cancelled, 1 when the job had
    already ended, 2 when it is unknown."""
    from swarm.catalog import load_catalog
    from swarm.client import SwarmHandle
    from swarm.errors import ConfigError
    from swarm.settings import load_settings
    from swarm.store import RedisJobStore

    check_job_id(job_id)
    settings = load_settings()
    if settings.embedded:
        raise ConfigError("`swarm cancel` needs SWARM_BROKER_URL (the job store is in Redis)")
    catalog = load_catalog(settings.config)
    store = RedisJobStore.from_settings(settings)
    store.spec(job_id)  # JobNotFoundError when unknown
    ended = store.report(job_id)
    if ended is not None:
        click.echo(f"swarm: job {job_id} already ended ({ended['status']}); nothing to cancel",
                   err=True)  # fmt: skip
        sys.exit(1)
    SwarmHandle(job_id, store, catalog).cancel()
    click.echo(f"job {job_id} cancelled: {CANCEL_EFFECT}", err=as_json)
    if wait:
        _wait_cancelled(store, catalog, job_id, as_json)
    elif as_json:
        from swarm.cli.render import print_json

        print_json({"job_id": job_id, "status": "cancelling"})


def _wait_cancelled(store: JobStore, catalog: Catalog, job_id: str, as_json: bool) -> None:
    from swarm.cli.follow import Watch, follow
    from swarm.cli.render import print_json
    from swarm.cost.pricing import usd_text

    started = time.monotonic()
    report = follow(Watch(store, catalog, job_id), None)
    if as_json:
        print_json(report)
    else:
        click.echo(
            f"job {job_id} ended {report['status']} after {time.monotonic() - started:.1f} s: "
            f"{report['succeeded']} of {report['total']} sub-agents succeeded, cost "
            f"{usd_text(report['cost_usd'])}"
        )
    sys.exit(0 if report["status"] == "cancelled" else 1)
