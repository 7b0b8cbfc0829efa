"""`swarm status JOB`: a job's final report, or its counts while it runs; with ``--node``, one
agent node's transcript. It reads the job store only: no Celery app, no gateway client."""

from __future__ import annotations

from rich.console import Console

from swarm.batch.status import status_json, status_lines
from swarm.catalog import load_catalog
from swarm.cli.render import finish, print_json, print_progress, render_for
from swarm.cli.transcript_view import print_transcript
from swarm.jobs.report import with_late_billing
from swarm.settings import Settings
from swarm.store import RedisJobStore
from swarm.store.batches import batch_store


def show_job(settings: Settings, job_id: str, node_id: str | None, as_json: bool) -> None:
    """Print the job's report (exit 1 unless it completed), its progress, or a node's
    transcript; JobNotFoundError when the store does not know the job."""
    catalog = load_catalog(settings.config)  # a bad catalog is one line here as everywhere
    store = RedisJobStore.from_settings(settings)
    store.spec(job_id)
    if node_id is not None:
        print_transcript(store, job_id, node_id, as_json)
        return
    report = store.report(job_id)
    if report is not None:
        report = with_late_billing(report, store.ledger(job_id), catalog)
        finish(report, as_json, render_for(report))
        return
    progress = store.progress(job_id)
    spec, files = store.spec(job_id), batch_store(store).files(job_id)
    if as_json:
        print_json({"job_id": job_id, "status": "running", **progress.model_dump(mode="json"),
                    **status_json(spec, files)})  # fmt: skip
    else:
        print_progress(progress, job_id, Console())
        for line in status_lines(spec, files):
            Console().print(line, highlight=False)
