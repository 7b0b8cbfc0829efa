"""Code review of a git range: the review schema, prompts, and the Markdown report."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, Field

from swarm.cost.pricing import usd_text
from swarm.jobs.structured import BadOutputError, validate_output

REVIEW_KIND = "review"
REVIEW_INSTRUCTION = (
    "Review this commit (message and diff). Report concrete risks: bugs, security problems, "
    "missing tests, breaking changes. For each, the severity, the file and line when known, "
    "and one sentence. An empty list is a fine answer for a harmless commit."
)
REVIEW_AGGREGATE = (
    "Write the review of this range of commits: the highest-severity risks first, each with "
    "the commits and files it concerns, then patterns across commits, then what looks fine."
)


class Risk(BaseModel):
    """One finding of a commit review."""

    severity: Literal["high", "medium", "low"]
    file: str = Field(description="Path of the file concerned, or '' if general")
    line: int | None = Field(default=None, description="Line in the new file, when known")
    description: str


class CommitReview(BaseModel):
    """What each review sub-agent answers."""

    risks: list[Risk]
    summary: str = Field(description="One sentence on the commit")


REVIEW_SCHEMA: dict[str, Any] = CommitReview.model_json_schema()
OPENED = re.compile(r"^read_file\(path='([^']*)'")
"""A read_file call as the envelope's ``tools_used`` shows it."""


NOT_IN_FORMAT = "_not in the requested format; the model's answer as it came:_"


def review_markdown(report: dict[str, Any]) -> str:
    """The report as Markdown: one section per commit, then the aggregated review."""
    lines = [f"# Review of {report['total']} commits ({report['status']})", ""]
    lines += [f"_job {report['job_id']}_", ""] if report.get("job_id") else []
    for node in report["nodes"]:
        lines += [f"## {node['input_ref']}", ""]
        lines += _truncation_lines(node) + _node_lines(node)
        lines.append("")
    lines += ["## Summary", "", report.get("final") or f"_no summary: {report.get('error')}_", ""]
    lines.append(
        f"_{report['succeeded']}/{report['total']} reviewed, cost {usd_text(report['cost_usd'])}"
        f"{' (simulated)' if report.get('simulated') else ''}_"
    )
    return "\n".join(lines)


def opened_files(tools_used: list[str]) -> list[str]:
    """The paths a reviewer read with read_file, in order, each once."""
    found = (OPENED.match(used) for used in tools_used)
    return list(dict.fromkeys(match.group(1) for match in found if match))


def _node_lines(node: dict[str, Any]) -> list[str]:
    if not node.get("steps"):
        return _review_lines(node)
    shown = ", ".join(f"`{p}`" for p in opened_files(node.get("tools_used") or [])) or "nothing"
    head = f"_{node['steps']} steps, {node['tool_calls']} tool calls; opened {shown}_"
    return [head, "", *_review_lines(node)]


def _truncation_lines(node: dict[str, Any]) -> list[str]:
    cut = node.get("truncation")
    if not cut:
        return []
    return [
        f"_input too long for the model: {cut['summarized_chars']:,} of "
        f"{cut['original_chars']:,} characters (~{cut['original_tokens']:,} tokens) were "
        f"summarised (the summaries' cost is in the report's models)_",
        "",
    ]


def _review_lines(node: dict[str, Any]) -> list[str]:
    raw = node.get("content") or ""
    if node["status"] != "ok":
        if node["error_kind"] == "bad_output" and raw.strip():
            return _raw_lines(raw)
        return [f"_not reviewed: {node['error_kind']}: {node['error']}_"]
    try:
        review = validate_output(raw, CommitReview)
    except BadOutputError:
        return _raw_lines(raw)
    lines = [review.summary, ""] if review.summary else []
    if not review.risks:
        return [*lines, "No risks found."]
    order = {"high": 0, "medium": 1, "low": 2}
    for risk in sorted(review.risks, key=lambda r: order[r.severity]):
        where = f"`{risk.file}:{risk.line}`" if risk.line else f"`{risk.file}`" if risk.file else ""
        lines.append(f"- **{risk.severity}** {where} {risk.description}".replace("  ", " "))
    return lines


def _raw_lines(raw: str) -> list[str]:
    """A weak model's answer that missed the schema: shown as it came, quoted."""
    return [NOT_IN_FORMAT, "", *(f"> {line}" if line else ">" for line in raw.strip().splitlines())]
