"""`swarm analyze DOC... --query TEXT`: planner, routed extraction, synthesis on Kimi K2.5."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from swarm.cli.context_option import context_option
from swarm.cli.decorators import MAX_TOKENS, JobFlags, job_options, one_line_errors
from swarm.cli.duration import DEADLINE

if TYPE_CHECKING:
    from rich.console import Console

    from swarm.client import SwarmClient, SwarmHandle


def survey_markdown(report: dict[str, Any]) -> str:
    """The survey: the synthesis, then its sources (which sub-agent read what, and how)."""
    from swarm.cost.pricing import usd_text

    lines = [
        f"# Survey ({report['status']})",
        "",
        report.get("final") or f"_{report.get('error')}_",
    ]
    lines += ["", "## Sources", ""]
    for node in report["nodes"]:
        mark = "ok" if node["status"] == "ok" else f"failed: {node['error_kind']}"
        cut = " (truncated)" if node.get("truncation") else ""
        tools = (
            f", {node['steps']} steps: {'; '.join(node['tools_used'])}" if node.get("steps") else ""
        )
        lines.append(
            f"- `{node['input_ref']}`{cut}: {node.get('kind') or '-'} on {node['model']}, {mark}"
            + tools
        )
    lines += ["", f"_cost {usd_text(report['cost_usd'])}, {report['wall_s']:.1f} s_"]
    return "\n".join(lines)


def _print_markdown(report: dict[str, Any], console: Console) -> None:
    console.print(survey_markdown(report), markup=False, highlight=False)


@click.command("analyze", short_help="Answer a question over documents (planned sub-agents).")
@click.argument("documents", nargs=-1)
@click.option("--query", required=True, help="The question the documents should answer.")
@click.option(
    "--agent", is_flag=True, help="Sub-agents may search and read every document (docs tools)."
)
@DEADLINE
@job_options
@MAX_TOKENS
@context_option
@one_line_errors
def analyze_command(
    documents: tuple[str, ...],
    query: str,
    agent: bool,
    job: JobFlags,
    deadline_s: float | None,
    max_tokens: int | None,
    context_files: tuple[Path, ...],
) -> None:
    """Answer QUERY over DOCUMENTS (txt, md; pdf with pypdf installed): a planner splits the
    question into routed sub-tasks, then a synthesis answers it. The plan decides the
    calls: the estimate line assumes one sub-task per document, and --budget-usd caps the
    cost while the job runs (it is not refused up front)."""
    from swarm.cli.context_option import read_context
    from swarm.cli.estimate_line import announce_plan
    from swarm.cli.execute import execute
    from swarm.settings import load_settings
    from swarm.sources.documents import read_documents

    job.check()
    items = read_documents(list(documents))
    context = read_context(context_files)

    def submit(client: SwarmClient) -> SwarmHandle:
        tools = "docs" if agent else None
        announce_plan(client, items, query, max_tokens=max_tokens, tools=tools, always=job.as_json)
        return client.plan(
            items,
            query,
            budget_usd=job.budget_usd,
            tools=tools,
            deadline_s=deadline_s,
            max_tokens=max_tokens,
            tenant=job.tenant,
            context=context,
        )

    execute(load_settings(), submit, job=job, render=_print_markdown)
