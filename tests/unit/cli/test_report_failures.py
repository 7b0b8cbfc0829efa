"""The CLI's report quotes the provider's refusal: the first error of each kind."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console

from swarm.cli.render import first_errors, print_report

REFUSAL = (
    "RateLimitError: HTTP 429 exceeded_current_quota_error: Your account org-1<ak-2> is "
    "suspended due to insufficient balance, please recharge your account"
)


def report(nodes: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "job_id": "j1", "status": "failed", "succeeded": 0, "total": len(nodes),
        "wall_s": 1.0, "error": "only 0 of 3 sub-agents succeeded", "final": "",
        "models": {}, "usage": {"prompt_tokens": 0, "completion_tokens": 0, "cached_tokens": 0},
        "cost_usd": 0.0, "failures_by_kind": {"insufficient_balance": 2, "cancelled": 1},
        "nodes": nodes,
    }  # fmt: skip


NODES = [
    {"node_id": "n0", "error_kind": "insufficient_balance", "error": REFUSAL},
    {"node_id": "n1", "error_kind": "insufficient_balance", "error": "held: ..."},
    {"node_id": "n2", "error_kind": "cancelled", "error": "job cancelled"},
]


def test_the_report_prints_the_providers_refusal_under_failures_by_kind() -> None:
    out = io.StringIO()
    print_report(report(NODES), Console(file=out, width=300))
    text = out.getvalue()
    assert "failures by kind: insufficient_balance 2" in text
    assert f"insufficient_balance: {REFUSAL}" in text
    assert "job cancelled" not in text  # a cancel is not a refusal


def test_first_errors_keeps_the_first_of_each_kind() -> None:
    assert first_errors(NODES) == {"insufficient_balance": REFUSAL}
