"""Showing reports on a terminal (rich), or as JSON."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from swarm.cost.pricing import usd_text
from swarm.jobs.report import COMPLETED

REVIEW_KIND = "review"
"""swarm.jobs.review.REVIEW_KIND, spelled here so that showing another job's report does not
import the review module and jsonschema (a fifth of `swarm status`' time); a unit test
checks that the two agree."""
PIPED_WIDTH = 160
"""Columns of piped output (a terminal's own width otherwise, or COLUMNS)."""

Render = Callable[[dict[str, Any], Console], None]
"""How a finished job's report is shown on a terminal."""


def stdout_console() -> Console:
    """The console reports print on: piped (and no COLUMNS set), PIPED_WIDTH columns wide
    instead of rich's 80, so a line or a table header is not cut or wrapped mid-phrase."""
    wide = sys.stdout.isatty() or "COLUMNS" in os.environ
    return Console(width=None if wide else PIPED_WIDTH)


def print_json(data: Any) -> None:
    """Indented JSON on stdout."""
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def print_report(report: dict[str, Any], console: Console) -> None:
    """Final text, the per-model table, and failures by kind."""
    status = report["status"]
    color = {"succeeded": "green", "partial": "yellow"}.get(status, "red")
    console.print(
        f"[bold]job[/] {report['job_id']}  [bold {color}]{status}[/]  "
        f"{report['succeeded']}/{report['total']} sub-agents succeeded"
        + (f", {report['cancelled']} cancelled" if report.get("cancelled") else "")
        + f"  wall {report['wall_s']:.2f} s"
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
        if field == "inputs_truncated" and report.get("inputs_cut_by_cap"):
            console.print(
                f"[yellow]{report['inputs_cut_by_cap']} of them because of max_tokens "
                "(--max-tokens): the answer's cap left the input too little of the window[/]"
            )
    failures = report.get("failures_by_kind") or {}
    failures = {k: v for k, v in failures.items() if k != "cancelled"}
    if failures:
        console.print(
            "failures by kind: " + ", ".join(f"{k} {v}" for k, v in sorted(failures.items()))
        )
    for kind, error in first_errors(report.get("nodes") or ()).items():
        console.print(f"  {kind}: {escape(error)}", soft_wrap=True)


def first_errors(nodes: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """The first node error of each kind, in kind order (the provider's refusal, quoted)."""
    found: dict[str, str] = {}
    for node in nodes:
        kind, error = node.get("error_kind"), node.get("error")
        if kind and error and kind != "cancelled" and kind not in found:
            found[kind] = error
    return dict(sorted(found.items()))


def _models_table(report: dict[str, Any]) -> Table:
    """Calls, tokens and cost per model and in total; the reasoning and cache-saved columns
    only when some model has them (a narrow terminal keeps the model names whole)."""
    simulated = bool(report.get(SIMULATED))
    title = "calls, tokens and cost per model"
    if simulated:
        title += " (SIMULATED gateway: nothing was billed)"
    models = report["models"]
    usage = report["usage"]
    saved = sum(m.get("cache_saved_usd", 0.0) for m in models.values())
    columns: list[tuple[str, Callable[[Mapping[str, Any]], str], str]] = [
        ("calls", lambda m: str(m["calls"]), str(sum(m["calls"] for m in models.values()))),
        ("prompt", lambda m: str(m["prompt_tokens"]), str(usage["prompt_tokens"])),
        ("cached", lambda m: str(m.get("cached_tokens", 0)), str(usage["cached_tokens"])),
        ("completion", lambda m: str(m["completion_tokens"]), str(usage["completion_tokens"])),
    ]
    if usage.get("reasoning_tokens"):
        columns.append(("reasoning", lambda m: str(m.get("reasoning_tokens", 0)),
                        str(usage["reasoning_tokens"])))  # fmt: skip
    columns.append((
        "cost USD (simulated)" if simulated else "cost USD",
        lambda m: usd_text(m["cost_usd"], sign=False),
        usd_text(report["cost_usd"], sign=False),
    ))  # fmt: skip
    if saved:
        columns.append(("cache saved", lambda m: usd_text(m.get("cache_saved_usd", 0.0),
                        sign=False), usd_text(saved, sign=False)))  # fmt: skip
    table = Table(title=title)
    table.add_column("model", justify="left")
    for header, _, _ in columns:
        table.add_column(header, justify="right")
    for name, line in models.items():
        table.add_row(name, *(cell(line) for _, cell, _ in columns))
    table.add_row("[bold]total", *(total for _, _, total in columns))
    return table


SIMULATED = "simulated"
"""Report key the CLI adds (true) to a job it ran against the built-in simulator (demo,
--simulate): its costs are the catalog's prices of simulated tokens, never billed."""


def render_for(report: dict[str, Any]) -> Callable[[dict[str, Any], Console], None]:
    """How a finished job is shown: a review job (its nodes of the review kind) as the
    review's Markdown, any other as the generic report."""
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
        render(report, stdout_console())
    if report["status"] not in COMPLETED:
        click.echo(f"swarm: job ended {report['status']}: {report.get('error') or ''}", err=True)
        sys.exit(1)
