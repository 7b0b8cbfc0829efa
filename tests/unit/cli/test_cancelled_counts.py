"""Cancelled nodes are counted apart from failed ones: the progress line while cancelling,
the live view, `swarm jobs`, and the report (its counts and its text)."""

from __future__ import annotations

import io

from doubles import job_spec
from rich.console import Console

from swarm.catalog import load_catalog
from swarm.cli.jobs_view import jobs_table
from swarm.cli.live_view import live_view
from swarm.cli.render import print_report
from swarm.cli.snapshot import JobSnapshot, plain_line, take_snapshot
from swarm.jobs.report import build_report
from swarm.records import ErrorKind, NodeEnvelope
from swarm.store import MemoryJobStore
from swarm.store.base import JobSummary


def envelope(node_id: str, kind: ErrorKind | None) -> NodeEnvelope:
    return NodeEnvelope(
        node_id=node_id, input_ref=node_id, model="kimi-k2.5",
        status="error" if kind else "ok", content="" if kind else "x", error_kind=kind,
    )  # fmt: skip


KINDS = [None, None, ErrorKind.TIMEOUT, ErrorKind.CANCELLED, ErrorKind.CANCELLED]


def cancelling() -> JobSnapshot:
    """5 nodes: 2 ok, 1 timed out, 2 cancelled with the job, which has no report yet."""
    store = MemoryJobStore()
    spec = job_spec(6)
    store.create_job(spec, ["a"] * 6)
    for node_id, kind in zip(spec.node_ids, KINDS, strict=False):
        store.finish_node("j1", envelope(node_id, kind))
    store.cancel("j1")
    return take_snapshot(store, load_catalog(), spec)


def test_the_line_while_cancelling_counts_cancelled_apart() -> None:
    line = plain_line(cancelling())
    assert (
        "cancelling: sub-agents running: done 2 failed 1 cancelled 2 in flight 0 pending 1" in line
    )


def test_the_live_view_has_a_cancelled_column() -> None:
    console = Console(record=True, width=120)
    console.print(live_view(cancelling()))
    text = console.export_text()
    assert "5/6 sub-agents ended: done 2 failed 1 cancelled 2" in text
    (row,) = [line for line in text.splitlines() if line.startswith("kimi-k2.5")]
    assert row.split()[1:5] == ["2", "1", "2", "0"]  # done, failed, cancelled, in flight


def test_the_jobs_table_has_a_cancelled_column() -> None:
    job = JobSummary(job_id="j1", submitted_at=0.0, status="cancelled", total=300, done=186,
                     failed=0, cancelled=108, in_flight=6, cost_usd=0.0)  # fmt: skip
    console = Console(record=True, width=160)
    console.print(jobs_table([job], 10.0))
    text = console.export_text()
    header = next(line for line in text.splitlines() if "done/total" in line).split()
    row = next(line for line in text.splitlines() if line.strip().startswith("j1")).split()
    assert header[1:5] == ["status", "done/total", "failed", "cancelled"]
    assert row[1:5] == ["cancelled", "186/300", "0", "108"]


def test_the_report_counts_cancelled_apart() -> None:
    spec = job_spec(5)
    nodes = [envelope(n, k) for n, k in zip(spec.node_ids, KINDS, strict=True)]
    report = build_report(spec, nodes, {}, load_catalog(), status="cancelled", final="",
                          wall_s=1.0, error="job cancelled").to_dict()  # fmt: skip
    assert (report["succeeded"], report["failed"], report["cancelled"]) == (2, 1, 2)
    out = io.StringIO()
    print_report(report, Console(file=out, width=120))
    text = out.getvalue()
    assert "2/5 sub-agents succeeded, 2 cancelled" in text
    assert "failures by kind: timeout 1" in text and "cancelled 2" not in text.split("kind:")[1]
