"""`swarm status JOB`: a job's final report, or where it stands while it runs (one line, or
with ``--watch`` the live view until the report); with ``--node``, one agent node's
transcript; with ``--nodes``, a page of its nodes (swarm.cli.nodes_view). It reads the job
store only (no Celery app, no gateway client), except that ``--watch`` loads Celery to ask
the workers for their queues when the job waits for one.

A job of more than nodes_view.SMALL_JOB nodes prints its summary (every field but its
nodes; ``--json`` still prints the whole report unless ``--summary``)."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import click

from swarm.batch.status import status_json, status_lines
from swarm.catalog import Catalog, load_catalog
from swarm.cli.nodes_view import SMALL_JOB, NodePage, show_nodes
from swarm.cli.render import finish, print_json, print_report, render_for
from swarm.cli.snapshot import JobSnapshot, plain_line, take_snapshot
from swarm.cli.transcript_view import print_transcript
from swarm.errors import JobNotFinishedError
from swarm.jobs.report import with_late_billing
from swarm.records import JobSpec
from swarm.settings import Settings
from swarm.store import RedisJobStore
from swarm.store.batches import batch_store

if TYPE_CHECKING:
    from celery import Celery


def show_job(
    settings: Settings,
    job_id: str,
    node_id: str | None,
    as_json: bool,
    watch: bool = False,
    *,
    nodes: NodePage | None = None,
    jsonl: bool = False,
    summary_only: bool = False,
) -> None:
    """Print the job's report (exit 1 unless it completed), its progress, a node's
    transcript, or a page of its nodes; with ``watch``, follow it to its report first.
    JobNotFoundError when the store does not know the job."""
    catalog = load_catalog(settings.config)  # a bad catalog is one line here as everywhere
    store = RedisJobStore.from_settings(settings)
    spec = store.spec(job_id)
    if node_id is not None:
        print_transcript(store, job_id, node_id, as_json)
        return
    if watch:
        watched = _watch(settings, catalog, store, job_id)
        finish(watched, as_json, render_for(watched))
        return
    summary = store.report_summary(job_id)
    if nodes is not None:
        if summary is None:
            raise JobNotFinishedError(f"job {job_id} is running; its nodes are listed once it ends")
        show_nodes(store, job_id, nodes, "jsonl" if jsonl else "json" if as_json else "table")
        return
    if summary is not None and (summary_only or (not as_json and summary["total"] > SMALL_JOB)):
        summary = with_late_billing(summary, store.ledger(job_id), catalog)
        if not as_json:
            click.echo(f"{summary['total']} nodes: swarm status {job_id} --nodes", err=True)
        finish(summary, as_json, print_report)
        return
    report = store.report(job_id) if summary is not None else None
    if report is not None:
        report = with_late_billing(report, store.ledger(job_id), catalog)
        finish(report, as_json, render_for(report))
        return
    show_running(store, catalog, spec, as_json)


def show_running(store: RedisJobStore, catalog: Catalog, spec: JobSpec, as_json: bool) -> None:
    """Print a running job's progress (and, while its submit sends, how far it got)."""
    snap = take_snapshot(store, catalog, spec)
    files = batch_store(store).files(spec.job_id)
    if as_json:
        print_json({**running_json(snap), **status_json(spec, files)})
        return
    click.echo(plain_line(snap))
    if snap.progress.sent is not None:
        click.echo(
            f"submitting: {snap.progress.sent} of {snap.progress.total} nodes sent"
            f" (if the submit stopped: swarm resume {spec.job_id})"
        )
    for line in status_lines(spec, files):
        click.echo(line)


def running_json(snap: JobSnapshot) -> dict[str, Any]:
    """A running job as JSON: its counts (Progress), ``status`` running (or cancelling),
    the phase, the cost so far (total and per model), 429s per model and the ETA."""
    return {
        "job_id": snap.job_id,
        "status": "cancelling" if snap.cancelled else "running",
        **snap.progress.model_dump(mode="json"),
        "pending": snap.progress.pending,
        "phase": snap.phase,
        "cost_usd": round(snap.cost_usd, 9),
        "budget_usd": snap.budget_usd,
        "models_cost_usd": {k: round(v, 9) for k, v in snap.model_cost_usd.items()},
        "rate_limited": snap.rate_limited,
        "elapsed_s": round(snap.elapsed_s, 3),
        "eta_s": None if snap.eta_s is None else round(snap.eta_s, 1),
    }


def _watch(
    settings: Settings, catalog: Catalog, store: RedisJobStore, job_id: str
) -> dict[str, Any]:
    from swarm.cli.follow import Watch, follow
    from swarm.cli.idle import celery_idle_check

    @functools.cache  # made once, when the job first waits for a worker
    def celery() -> Celery:
        from swarm.jobs.queueing import make_celery

        return make_celery(settings, catalog)

    watch = Watch(store, catalog, job_id, idle_check=celery_idle_check(celery, catalog))
    return follow(watch, None)
