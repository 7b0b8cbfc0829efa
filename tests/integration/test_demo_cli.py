"""`swarm demo` on a machine with no Redis and no key, as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

CONTRACT = {
    "job_id",
    "status",
    "total",
    "succeeded",
    "failed",
    "final",
    "wall_s",
    "usage",
    "cost_usd",
    "models",
    "nodes",
}
NODE = {
    "node_id",
    "input_ref",
    "model",
    "status",
    "content",
    "usage",
    "latency_ms",
    "attempts",
    "error_kind",
    "error",
}


def run_demo(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`swarm demo` with no SWARM_* or OPENAI_* variable set, outside the repository."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SWARM_", "OPENAI_"))}
    return subprocess.run(
        [sys.executable, "-m", "swarm.cli.main", "demo", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_demo_json_runs_embedded_and_reports_every_field(tmp_path: Path) -> None:
    done = run_demo(tmp_path, "--inputs", "30", "--json")
    assert done.returncode == 0, done.stderr
    assert "SIMULATED" in done.stderr
    report = json.loads(done.stdout)
    assert report.keys() >= CONTRACT and report["nodes"][0].keys() >= NODE
    assert (report["status"], report["total"], report["succeeded"]) == ("succeeded", 30, 30)
    assert report["models"]["kimi-k2.5"]["calls"] == 31
    assert "results=30" in report["final"]
    nodes_prompt = sum(n["usage"]["prompt_tokens"] for n in report["nodes"])
    assert report["usage"]["prompt_tokens"] > nodes_prompt  # the aggregation is billed too
    usage = report["usage"]
    uncached = usage["prompt_tokens"] - usage["cached_tokens"]
    expected = (
        uncached * 1.50 + usage["cached_tokens"] * 0.15 + usage["completion_tokens"] * 0.60
    ) / 1e6
    assert abs(report["cost_usd"] - expected) < 1e-5


def test_demo_text_report(tmp_path: Path) -> None:
    done = run_demo(tmp_path, "--inputs", "5")
    assert done.returncode == 0, done.stderr
    assert "succeeded" in done.stdout and "5/5 sub-agents succeeded" in done.stdout
    assert "kimi-k2.5" in done.stdout and "cost USD" in done.stdout
