"""Showing progress and reports on a terminal (rich), or as JSON."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.panel import Panel
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from swarm.jobs.report import COMPLETED

if TYPE_CHECKING:
    from swarm.client import SwarmHandle
    from swarm.store import Progress as JobProgress

Render = Callable[[dict[str, Any], Console], None]
"""How a finished job's report is shown on a terminal."""


def progress_line(p: JobProgress) -> str:
    """``done 40  failed 2  in flight 16  pending 42  | kimi-k2.5 40/2/16``"""
    per_model = "  ".join(
        f"{name} {m.done}/{m.failed}/{m.in_flight}" for name, m in p.models.items()
    )
    return f"done {p.done}  failed {p.failed}  in flight {p.in_flight}  pending {p.pending}" + (
        f"  | {per_model}" if per_model else ""
    )


def follow(handle: SwarmHandle, console: Console | None, timeout_s: float | None) -> dict[str, Any]:
    """Wait for the report; on a terminal, draw a live bar of nodes done and failed."""
    if console is None:
        return handle.wait(timeout=timeout_s).to_dict()
    columns = (
        TextColumn("[bold]swarm[/] {task.fields[job]}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TextColumn("{task.fields[line]}"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task("", total=None, job=handle.id[:8], line="starting")
        return _poll(
            handle,
            timeout_s,
            lambda p: bar.update(
                task, total=p.total, completed=p.done + p.failed, line=progress_line(p)
            ),
        )


def _poll(
    handle: SwarmHandle, timeout_s: float | None, show: Callable[[JobProgress], None]
) -> dict[str, Any]:
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while (report := handle.report()) is None:
        show(handle.progress())
        if deadline is not None and time.monotonic() > deadline:
            return handle.wait(timeout=0).to_dict()
        time.sleep(0.1)
    return report.to_dict()


def print_json(data: Any) -> None:
    """Indented JSON on stdout."""
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def print_report(report: dict[str, Any], console: Console) -> None:
    """Final text, the per-model table, and failures by kind."""
    status = report["status"]
    color = {"succeeded": "green", "partial": "yellow"}.get(status, "red")
    console.print(
        f"[bold]job[/] {report['job_id']}  [bold {color}]{status}[/]  "
        f"{report['succeeded']}/{report['total']} sub-agents succeeded  "
        f"wall {report['wall_s']:.2f} s"
    )
    if report.get("error"):
        console.print(f"[red]reason:[/] {report['error']}")
    if report.get("final"):
        console.print(Panel(report["final"], title=f"final ({report['aggregate_model']})"))
    console.print(_models_table(report))
    for field, what in (
        ("inputs_truncated", "inputs did not fit their model's context (middle summarised)"),
        ("truncated", "answers were cut at max_tokens (finish_reason length)"),
        ("capped", "requests were sent a smaller max_tokens than asked (pacing)"),
    ):
        if report.get(field):
            console.print(f"[yellow]{report[field]} {what}[/]")
    failures = report.get("failures_by_kind") or {}
    if failures:
        console.print(
            "failures by kind: " + ", ".join(f"{k} {v}" for k, v in sorted(failures.items()))
        )


def _models_table(report: dict[str, Any]) -> Table:
    table = Table(title="calls, tokens and cost per model")
    for col in ("model", "calls", "prompt", "cached", "completion", "cost USD"):
        table.add_column(col, justify="left" if col == "model" else "right")
    for name, line in report["models"].items():
        table.add_row(
            name,
            str(line["calls"]),
            str(line["prompt_tokens"]),
            str(line.get("cached_tokens", 0)),
            str(line["completion_tokens"]),
            f"{line['cost_usd']:.4f}",
        )
    usage = report["usage"]
    table.add_row(
        "[bold]total",
        str(sum(m["calls"] for m in report["models"].values())),
        str(usage["prompt_tokens"]),
        str(usage["cached_tokens"]),
        str(usage["completion_tokens"]),
        f"{report['cost_usd']:.4f}",
    )
    return table


def print_progress(p: JobProgress, job_id: str, console: Console) -> None:
    """A running job's counts."""
    console.print(f"job {job_id} running: {p.done + p.failed}/{p.total}  {progress_line(p)}")


def render_for(report: dict[str, Any]) -> Callable[[dict[str, Any], Console], None]:
    """How a finished job is shown: a review job (its nodes of the review kind) as the
    review's Markdown, any other as the generic report."""
    from swarm.jobs.review import REVIEW_KIND

    nodes = report.get("nodes") or []
    if not nodes or any(node.get("kind") != REVIEW_KIND for node in nodes):
        return print_report
    return print_review


def print_review(report: dict[str, Any], console: Console) -> None:
    """A review job's report as Markdown; soft_wrap keeps its lines whole when piped to a
    file or a pager (no hard wrap at 80 columns breaking headings)."""
    from swarm.jobs.review import review_markdown

    console.print(review_markdown(report), markup=False, highlight=False, soft_wrap=True)


def finish(report: dict[str, Any], as_json: bool, render: Render = print_report) -> None:
    """Print the report (JSON or rendered) and exit 1 unless the job completed."""
    if as_json:
        print_json(report)
    else:
        render(report, Console())
    if report["status"] not in COMPLETED:
        click.echo(f"swarm: job ended {report['status']}: {report.get('error') or ''}", err=True)
        sys.exit(1)
