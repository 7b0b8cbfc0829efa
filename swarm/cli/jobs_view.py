"""`swarm jobs`' output: one row per job (JobStore.recent_jobs), as a table or JSON."""

from __future__ import annotations

import time

import click
from rich.table import Table

from swarm.cli.render import print_json, stdout_console
from swarm.cost.pricing import usd_text
from swarm.errors import ConfigError
from swarm.settings import Settings
from swarm.store import JobSummary, RedisJobStore

STATUS_STYLE = {"succeeded": "green", "partial": "yellow", "running": "cyan"}


def age(seconds: float) -> str:
    """``42s``, ``7m``, ``3h``, ``2d`` ago."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(max(seconds, 0))}s"


def jobs_table(jobs: list[JobSummary], now: float) -> Table:
    many = f"the {len(jobs)} jobs submitted last, newest first"
    table = Table(title="the job submitted last" if len(jobs) == 1 else many, box=None)
    table.add_column("job", no_wrap=True)
    table.add_column("status", no_wrap=True)
    for head in ("done/total", "failed", "cancelled", "in flight", "cost so far", "age"):
        table.add_column(head, justify="right", no_wrap=True)
    table.add_column("phase", no_wrap=True)
    for job in jobs:
        style = STATUS_STYLE.get(job.status, "red")
        table.add_row(
            job.job_id,
            f"[{style}]{job.status}[/]",
            f"{job.done}/{job.total}",
            str(job.failed),
            str(job.cancelled),
            str(job.in_flight),
            usd_text(job.cost_usd),
            age(now - job.submitted_at),
            job.phase or "",
        )
    return table


def show_jobs(settings: Settings, limit: int, as_json: bool) -> None:
    """Print the ``limit`` jobs submitted last."""
    if settings.embedded:
        raise ConfigError("`swarm jobs` needs SWARM_BROKER_URL (the job store is in Redis)")
    jobs = RedisJobStore.from_settings(settings).recent_jobs(limit)
    now = time.time()
    if as_json:
        print_json([{**job.model_dump(mode="json"), "age_s": round(now - job.submitted_at, 1)}
                    for job in jobs])  # fmt: skip
        return
    if not jobs:
        click.echo("no jobs in the job store (a job is listed while its data lives in Redis)")
        return
    stdout_console().print(jobs_table(jobs, now))
