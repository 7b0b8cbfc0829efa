"""The report's lines about what was done to a job's inputs and answers."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console

from swarm.cli.render import print_report


def printed(**fields: Any) -> str:
    report = {
        "job_id": "j", "status": "succeeded", "succeeded": 2, "total": 2, "wall_s": 1.0,
        "final": "", "models": {}, "cost_usd": 0.0,
        "usage": {"prompt_tokens": 0, "cached_tokens": 0, "completion_tokens": 0}, **fields,
    }  # fmt: skip
    out = io.StringIO()
    print_report(report, Console(file=out, width=200))
    return out.getvalue()


def test_inputs_cut_because_of_max_tokens_are_said_to_be() -> None:
    text = printed(inputs_truncated=2, inputs_cut_by_cap=1)
    assert "2 inputs did not fit their model's context (middle summarised)" in text
    assert "1 of them because of max_tokens (--max-tokens)" in text
    assert "because of max_tokens" not in printed(inputs_truncated=2)
