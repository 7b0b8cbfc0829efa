"""The packaged catalog's jobs on a gateway that holds Moonshot's documented rules
(``swarm sim --provider moonshot``): plain nodes, tool-using agent nodes, ``review`` and
``analyze`` (planner included) succeed with kimi-k2.5's thinking on (the catalog's default)
and off, no answer is cut by its reasoning, and the report's ledger equals the gateway's
own counts (prompt, completion, cached).

The gateway refuses any sampling field on kimi-k2.5 but the fixed value, and an agent's
tool-call message sent back without its ``reasoning_content`` while thinking is on: the
jobs below fail on a request shape that breaks either rule.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

import swarm.testing
from swarm.catalog import load_catalog
from swarm.sim import SimConfig, start_in_thread

INSTRUCTION = "Review this module for bugs. " + "Check each rule of the style guide. " * 200
"""Long enough for the simulator's prompt cache (cached tokens in the ledger)."""


def catalog_text(thinking: str) -> str:
    """The packaged catalog, with kimi-k2.5's thinking as given for every kind."""
    text = resources.files("swarm.data").joinpath("catalog.toml").read_text("utf-8")
    if thinking == "disabled":
        text = text.replace('thinking = "enabled"', 'thinking = "disabled"')
        text = re.sub(r"(?m)^thinking_by_kind = .*\n", "", text)
    return text


@pytest.fixture(params=["enabled", "disabled"])
def catalog_path(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "catalog.toml"
    path.write_text(catalog_text(str(request.param)))
    yield path


@pytest.fixture
def sim() -> Iterator[Any]:
    with start_in_thread(SimConfig(provider="moonshot")) as server:
        yield server


def thinking_of(path: Path) -> bool:
    return 'thinking = "enabled"' in path.read_text()


def assert_ledger_equals(report: dict[str, Any], stats: dict[str, Any]) -> None:
    """Every call the gateway answered is in the report's usage, at the gateway's counts."""
    assert stats["client_errors"] == 0, stats  # no field refused, no reasoning left out
    usage = report["usage"]
    assert usage["prompt_tokens"] == stats["prompt_tokens"]
    assert usage["completion_tokens"] == stats["completion_tokens"]
    assert usage["cached_tokens"] == stats["cached_tokens"]
    assert sum(line["calls"] for line in report["models"].values()) == stats["completed"]


def assert_nodes_answered(report: dict[str, Any], thinking: bool) -> None:
    for node in report["nodes"]:
        assert node["status"] == "ok", (node["error_kind"], node["error"])
        assert node["content"], node
        if node["model"] == "kimi-k2.5":
            assert bool(node.get("reasoning")) == thinking, node


def test_plain_and_agent_jobs(catalog_path: Path, sim: Any, tmp_path: Path) -> None:
    catalog = load_catalog(catalog_path)
    thinking = thinking_of(catalog_path)
    (tmp_path / "util.py").write_text("def add(a, b):\n    return a - b\n")
    with swarm.testing.embedded(base_url=sim.base_url, api_key="k", catalog=catalog) as client:
        plain = client.submit([f"def f{i}(): return {i}" for i in range(4)], INSTRUCTION)
        plain_report = plain.wait(timeout=90).to_dict()
        agent = client.submit(
            ["util.py is imported by main.py [[sim:tool_steps=3]]"],
            "Look at the code with the tools",
            tools="repo",
            tool_root=str(tmp_path),
        )
        agent_report = agent.wait(timeout=90).to_dict()
        stats = sim.stats()
    assert plain_report["status"] == agent_report["status"] == "succeeded"
    assert_nodes_answered(plain_report, thinking)
    assert_nodes_answered(agent_report, thinking)
    (node,) = agent_report["nodes"]
    assert node["steps"] == 4 and node["tool_calls"] == 3  # three tool steps, then the answer
    assert stats["cached_tokens"] > 0
    both = {
        "usage": {
            k: plain_report["usage"][k] + agent_report["usage"][k]
            for k in ("prompt_tokens", "completion_tokens", "cached_tokens")
        },
        "models": {
            f"{i}:{name}": line
            for i, r in enumerate((plain_report, agent_report))
            for name, line in r["models"].items()
        },
    }
    assert_ledger_equals(both, stats)


def swarm_cli(args: list[str], cwd: Path, env: dict[str, str]) -> dict[str, Any]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("SWARM_", "OPENAI_"))}
    done = subprocess.run(
        [sys.executable, "-m", "swarm.cli.main", *args, "--json"],
        cwd=cwd,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def new_repo(root: Path) -> Path:
    repo = root / "repo"
    repo.mkdir()
    for args in (["init", "-q", "-b", "main"], ["config", "user.email", "t@example.invalid"],
                 ["config", "user.name", "T"]):  # fmt: skip
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)
    for i, msg in enumerate(["add parser", "fix off-by-one"]):
        (repo / f"m{i}.py").write_text(f"def f{i}():\n    return {i}\n")
        subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
        subprocess.run(["git", "-C", str(repo), "commit", "-q", "-m", msg], check=True)
    return repo


def test_review_and_analyze(catalog_path: Path, sim: Any, tmp_path: Path) -> None:
    thinking = thinking_of(catalog_path)
    env = {"SWARM_BASE_URL": sim.base_url, "SWARM_API_KEY": "k", "SWARM_CONFIG": str(catalog_path)}
    review = swarm_cli(["review", str(new_repo(tmp_path))], tmp_path, env)
    assert review["status"] == "succeeded" and review["total"] == 2
    assert_nodes_answered(review, thinking)
    after_review = sim.stats()
    assert_ledger_equals(review, after_review)
    for i in range(3):
        (tmp_path / f"paper{i}.md").write_text(f"# Paper {i}\nWe measured {i * 10}% gains.\n")
    papers = [f"paper{i}.md" for i in range(3)]
    analyze = swarm_cli(["analyze", *papers, "--query", "Who gains most?"], tmp_path, env)
    assert analyze["status"] == "succeeded" and analyze["total"] == 3
    assert_nodes_answered(analyze, thinking)
    stats = sim.stats()
    assert stats["client_errors"] == 0
    for key in ("prompt_tokens", "completion_tokens", "cached_tokens"):
        assert analyze["usage"][key] == stats[key] - after_review[key], key
