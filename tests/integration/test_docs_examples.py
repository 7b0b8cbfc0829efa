"""The Python examples of the docs, run as they are written: README.md's quickstart,
docs/getting-started.md's first job and docs/producer-api.md's client, handle and report,
each in a fresh `python` whose environment is a stack's SWARM_* (real redis-server, a
`celery -A workers worker`, the simulator over HTTP), so the docs cannot drift from the API."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from stack import Stack, Worker, stack_fixture

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]

stack = stack_fixture(["--latency-ms", "100", "--seed", "3"], Worker("w1", c=8))


def python_blocks(page: Path, section: str | None = None) -> list[str]:
    """The ```python blocks of ``page`` (of its ``## section`` only, when given)."""
    text = page.read_text()
    if section is not None:
        start = text.index(f"## {section}\n")
        following = text.find("\n## ", start + 1)
        text = text[start : following if following > 0 else len(text)]
    return re.findall(r"^```python\n(.*?)^```$", text, re.M | re.S)


def run_example(code: str, stack: Stack, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SWARM_", "OPENAI_"))}
    return subprocess.run(
        [sys.executable, "-c", code], env={**env, **stack.env}, cwd=cwd, capture_output=True,
        text=True, timeout=300,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("page", "section"),
    [
        ("README.md", "Quickstart: a local stack"),
        ("docs/getting-started.md", "2. A local stack"),
    ],
)
def test_the_first_python_job_of_the_docs_runs(
    page: str, section: str, stack: Stack, tmp_path: Path
) -> None:
    (code,) = python_blocks(ROOT / page, section)
    done = run_example(code, stack, tmp_path)
    assert done.returncode == 0, done.stderr
    assert re.search(r"^succeeded \d+\.\d+", done.stdout, re.M), done.stdout


def test_the_producer_api_example_runs_as_written(stack: Stack, tmp_path: Path) -> None:
    (code,) = python_blocks(ROOT / "docs/producer-api.md", "Client, handle and report")
    done = run_example(code, stack, tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    job_id, finished = lines[0].split()
    assert re.fullmatch(r"[0-9a-f]{32}", job_id) and finished == "False"
    phase, units_done, units_total, _cost = lines[1].split()
    assert phase in ("nodes", "aggregating") and int(units_done) < int(units_total) == 3
    assert lines[2].startswith("succeeded ") and "results=2" in lines[2]
    assert lines[-1] == "cancelled"
