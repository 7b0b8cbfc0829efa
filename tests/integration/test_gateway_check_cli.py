"""`swarm run` against a gateway that serves only the completion path (no GET /v1/models),
as a user runs it: embedded mode, the simulator with ``--no-models`` as its own process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import procs


def run_inputs(cwd: Path, base_url: str, *lines: str) -> subprocess.CompletedProcess[str]:
    """`swarm run - --json` with one input per line, only SWARM_BASE_URL set (no key)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SWARM_", "OPENAI_"))}
    return subprocess.run(
        [sys.executable, "-m", "swarm.cli.main", "run", "-", "--json"],
        cwd=cwd,
        env={**env, "SWARM_BASE_URL": base_url},
        input="".join(f"{line}\n" for line in lines),
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_run_against_a_gateway_without_models_succeeds(tmp_path: Path) -> None:
    proc, base_url = procs.start_sim(["--no-models"], tmp_path)
    with proc:
        done = run_inputs(tmp_path, base_url, "first diff", "second diff", "third diff")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["status"], report["total"], report["succeeded"]) == ("succeeded", 3, 3)


def test_a_base_url_missing_v1_is_still_refused_with_the_hint(tmp_path: Path) -> None:
    proc, base_url = procs.start_sim(["--no-models"], tmp_path)
    with proc:
        root = base_url.removesuffix("/v1")
        done = run_inputs(tmp_path, root, "first diff")
    assert done.returncode != 0 and done.stdout == ""
    assert f"wrong base URL (missing /v1?): {root}/models" in done.stderr
    assert "Traceback" not in done.stderr
