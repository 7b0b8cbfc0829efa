"""`swarm status JOB`: a job's final report, or its counts while it runs; with ``--node``, one
agent node's transcript; with ``--nodes``, a page of its nodes (swarm.cli.nodes_view). It
reads the job store only: no Celery app, no gateway client.

A job of more than nodes_view.SMALL_JOB nodes prints its summary (every field but its
nodes; ``--json`` still prints the whole report unless ``--summary``)."""

from __future__ import annotations

from rich.console import Console

from swarm.catalog import load_catalog
from swarm.cli.nodes_view import SMALL_JOB, NodePage, show_nodes
from swarm.cli.render import finish, print_json, print_progress, print_report, render_for
from swarm.cli.transcript_view import print_transcript
from swarm.errors import JobNotFinishedError
from swarm.jobs.report import with_late_billing
from swarm.settings import Settings
from swarm.store import RedisJobStore


def show_job(
    settings: Settings,
    job_id: str,
    node_id: str | None,
    as_json: bool,
    *,
    nodes: NodePage | None = None,
    jsonl: bool = False,
    summary_only: bool = False,
) -> None:
    """Print the job's report (exit 1 unless it completed), its progress, a node's
    transcript, or a page of its nodes; JobNotFoundError when the store does not know the
    job."""
    catalog = load_catalog(settings.config)  # a bad catalog is one line here as everywhere
    store = RedisJobStore.from_settings(settings)
    store.spec(job_id)
    if node_id is not None:
        print_transcript(store, job_id, node_id, as_json)
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
            Console(stderr=True).print(f"{summary['total']} nodes: swarm status {job_id} --nodes")
        finish(summary, as_json, print_report)
        return
    report = store.report(job_id) if summary is not None else None
    if report is not None:
        report = with_late_billing(report, store.ledger(job_id), catalog)
        finish(report, as_json, render_for(report))
        return
    progress = store.progress(job_id)
    if as_json:
        print_json({"job_id": job_id, "status": "running", **progress.model_dump(mode="json")})
    else:
        print_progress(progress, job_id, Console())
