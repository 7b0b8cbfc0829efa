"""`swarm review` over a git repository the test creates, and `swarm analyze` over files,
as a user runs them (embedded mode, simulated gateway)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path


def swarm(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SWARM_", "OPENAI_"))}
    return subprocess.run(
        [sys.executable, "-m", "swarm.cli.main", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def new_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "t@example.invalid")
    git(repo, "config", "user.name", "T")
    return repo


def test_review_of_known_commits(tmp_path: Path) -> None:
    repo = new_repo(tmp_path)
    for i, msg in enumerate(["add parser", "fix off-by-one", "drop auth check"]):
        (repo / f"m{i}.py").write_text(f"def f{i}():\n    return {i}\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", msg)
    text = swarm(["review", str(repo), "--last", "2", "--simulate"], tmp_path)
    assert text.returncode == 0, text.stderr
    out = text.stdout
    assert "# Review of 2 commits" in out and "fix off-by-one" in out and "drop auth check" in out
    assert "add parser" not in out and "## Summary" in out
    assert any(f"**{s}**" in out for s in ("high", "medium", "low"))
    done = swarm(["review", str(repo), "--simulate", "--json"], tmp_path)
    report = json.loads(done.stdout)
    assert report["total"] == 3 and report["succeeded"] == 3
    for node in report["nodes"]:
        review = json.loads(node["content"])
        assert node["kind"] == "review" and node["model"] == "kimi-k2.5"
        assert set(review) == {"risks", "summary"}
    bad = swarm(["review", str(tmp_path / "nowhere"), "--simulate"], tmp_path)
    assert bad.returncode == 2 and "not a git repository" in bad.stderr


def test_analyze_plans_over_documents(tmp_path: Path) -> None:
    for i in range(3):
        (tmp_path / f"paper{i}.md").write_text(f"# Paper {i}\nWe measured {i * 10}% gains.\n")
    done = swarm(
        [
            "analyze",
            "paper0.md",
            "paper1.md",
            "paper2.md",
            "--query",
            "Who gains most?",
            "--simulate",
            "--json",
        ],
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["status"] == "succeeded" and report["total"] == 3
    assert sorted(n["input_ref"] for n in report["nodes"]) == [
        "paper0.md",
        "paper1.md",
        "paper2.md",
    ]
    calls = sum(m["calls"] for m in report["models"].values())
    assert calls == 3 + 2  # planner, three sub-agents, aggregation
    # --json: the pre-flight line is always on stderr, the planner's share first
    assert re.search(
        r"^swarm: estimate: up to \$\d+\.\d{4} for the planner \(\$\d+\.\d{4}\), 3 sub-agents "
        r"\(\$\d+\.\d{4}\) and the aggregation \(\$\d+\.\d{4}\), if the plan gives each "
        r"document one sub-task",
        done.stderr,
        re.M,
    ), done.stderr
    text = swarm(["analyze", "paper0.md", "--query", "Who?", "--simulate"], tmp_path)
    assert text.returncode == 0 and "## Sources" in text.stdout and "paper0.md" in text.stdout
    assert "estimate:" not in text.stderr  # far below SWARM_ESTIMATE_NOTICE_USD
    empty = swarm(["analyze", "paper0.md", "--query", " ", "--simulate"], tmp_path)
    assert empty.returncode == 2 and "query is empty" in empty.stderr


def test_analyze_takes_the_options_run_and_review_share(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# A\n" + "Latency fell by 30% on every run. " * 40)
    capped = swarm(
        ["analyze", "a.md", "--query", "What got faster?", "--simulate", "--max-tokens", "5",
         "--timeout", "100", "--budget-usd", "5", "--json"],
        tmp_path,
    )  # fmt: skip
    assert capped.returncode == 0, capped.stderr
    nodes = json.loads(capped.stdout)["nodes"]
    assert nodes and all(0 < n["usage"]["completion_tokens"] <= 5 for n in nodes)
    bad = swarm(["analyze", "a.md", "--query", "Q", "--simulate", "--timeout", "0"], tmp_path)
    assert bad.returncode == 2 and "--timeout must be a positive number" in bad.stderr


def test_review_and_analyze_as_agents(tmp_path: Path) -> None:
    repo = new_repo(tmp_path)
    (repo / "lib.py").write_text("def half(x):\n    return x / 0  # wrong\n")
    (repo / "main.py").write_text("print(1)\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "start")
    (repo / "main.py").write_text("from lib import half\nprint(half(2))\n")
    git(repo, "commit", "-q", "-am", "use half [[sim:read=lib.py]]")
    done = swarm(["review", str(repo), "--last", "1", "--agent", "--simulate"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "_2 steps, 1 tool calls; opened `lib.py`_" in done.stdout
    (tmp_path / "a.md").write_text("# A\nLatency fell by 30%.\n")
    (tmp_path / "b.md").write_text("# B\nThroughput rose.\n")
    survey = swarm(
        ["analyze", "a.md", "b.md", "--query", "What got faster?", "--agent", "--simulate"],
        tmp_path,
    )
    assert survey.returncode == 0, survey.stderr
    assert "steps: search_documents(query='query-0')" in survey.stdout


def test_review_takes_the_options_its_budget_refusal_names(tmp_path: Path) -> None:
    repo = new_repo(tmp_path)
    for i in range(2):
        (repo / f"m{i}.py").write_text(f"x = {i}\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", f"change {i}")
    refused = swarm(["review", str(repo), "--simulate", "--budget-usd", "0.000001"], tmp_path)
    assert refused.returncode == 2 and "exceeds the budget" in refused.stderr
    assert "--force" in refused.stderr
    forced = swarm(
        ["review", str(repo), "--simulate", "--budget-usd", "0.000001", "--force",
         "--max-tokens", "64", "--timeout", "100", "--json"],
        tmp_path,
    )  # fmt: skip
    assert forced.returncode == 1, forced.stderr  # ran, and stopped at the budget
    assert json.loads(forced.stdout)["status"] == "budget_exceeded"
    assert "swarm: estimate: expected ~$" in forced.stderr  # --json: always on stderr
    bad = swarm(["review", str(repo), "--simulate", "--timeout", "0"], tmp_path)
    assert bad.returncode == 2 and "--timeout must be a positive number" in bad.stderr
