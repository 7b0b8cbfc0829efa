"""`--context FILE` end to end (a `swarm run --simulate` process): the files' text is in
every node's prompt and the pre-flight states the cost expected with its cache hits; a file
that cannot be read is one line on stderr."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def swarm(cwd: Path, *args: str, stdin: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SWARM_", "OPENAI_"))}
    return subprocess.run(
        [sys.executable, "-m", "swarm.cli.main", *args],
        cwd=cwd, env=env, input=stdin, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_run_reads_the_context_files_into_every_prompt(tmp_path: Path) -> None:
    context = tmp_path / "conventions.md"
    context.write_text("Keep every module under 400 lines. " * 200)
    args = ["run", "-", "--simulate", "--json", "--model", "kimi-k2.5"]
    shared = swarm(tmp_path, *args, "--context", str(context), stdin="one\ntwo\nthree\n")
    assert shared.returncode == 0, shared.stderr
    assert "expected from the prompt cache" in shared.stderr
    bare = swarm(tmp_path, *args, stdin="one\ntwo\nthree\n")
    with_context, without = json.loads(shared.stdout), json.loads(bare.stdout)
    for node, plain in zip(with_context["nodes"], without["nodes"], strict=True):
        assert node["usage"]["prompt_tokens"] > plain["usage"]["prompt_tokens"] + 1500


def test_a_missing_context_file_is_one_line(tmp_path: Path) -> None:
    result = swarm(tmp_path, "run", "-", "--simulate", "--context", "nope.md", stdin="one\n")
    assert result.returncode == 2 and "nope.md" in result.stderr
    assert result.stderr.count("\n") == 1
