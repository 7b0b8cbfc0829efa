"""End to end: real redis-server, the simulator over HTTP, two `celery -A workers
worker` processes, and the producer API / CLI."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from stack import API_KEY, Stack, Worker, stack_fixture

from swarm.records import InputItem

pytestmark = pytest.mark.integration


stack = stack_fixture(
    ["--latency-p50-ms", "40", "--latency-p99-ms", "150", "--seed", "3"],
    Worker("w1"),  # every queue of the catalog
    Worker("w2", "llm.kimi-k2.5"),
)


def diffs(n: int, bad: set[int] = frozenset()) -> list[InputItem]:  # type: ignore[assignment]
    return [
        InputItem(
            ref=f"pr-{i}.diff",
            text=f"diff --git a/f{i}.py\n+x = {i}\n" + ("[[sim:status=400]]" if i in bad else ""),
        )
        for i in range(n)
    ]


def aggregate_runs(stack: Stack, job_id: str, settle_s: float = 10.0) -> int:
    """How many workers logged the job's aggregation as succeeded (Celery logs it just after
    the report is stored, so wait for the first line, then for stragglers)."""
    pattern = rf"Task swarm\.aggregate\[{job_id}-aggregate\] succeeded"
    deadline = time.monotonic() + settle_s
    while not re.search(pattern, stack.worker_logs()) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    return len(re.findall(pattern, stack.worker_logs()))


def test_hundred_inputs_all_succeed_and_usage_equals_the_gateways(stack: Stack) -> None:
    stack.reset_stats()
    handle = stack.client().submit(diffs(100), "Review this diff")
    report = handle.wait(timeout=120).to_dict()
    assert report["status"] == "succeeded", report.get("error")
    assert (report["total"], report["succeeded"], report["failed"]) == (100, 100, 0)
    stats = stack.stats()
    # Every billed call is in the report, and nothing else: 100 nodes + 1 aggregation.
    assert stats["completed"] == 101 == report["models"]["kimi-k2.5"]["calls"]
    assert report["usage"]["prompt_tokens"] == stats["prompt_tokens"]
    assert report["usage"]["completion_tokens"] == stats["completion_tokens"]
    assert report["usage"]["cached_tokens"] == stats.get("cached_tokens", 0)
    assert sum(n["usage"]["prompt_tokens"] for n in report["nodes"]) < stats["prompt_tokens"]
    # The aggregation saw all 100 results (the simulator echoes the <result> count).
    assert "results=100" in report["final"]
    # The chord callback ran exactly once, on one of the two workers.
    assert aggregate_runs(stack, handle.id) == 1
    # Both workers served sub-agents.
    logs = [w.log_text() for w in stack.workers]
    assert all("swarm.subagent" in text for text in logs)
    assert report["cost_usd"] > 0 and report["wall_s"] > 0
    progress = handle.progress()
    assert (progress.nodes_done, progress.failed, progress.in_flight, progress.finished) == (
        100,
        0,
        0,
        True,
    )
    assert (progress.done, progress.total) == (101, 101)  # the nodes and the aggregation


def test_non_retryable_errors_end_partial_with_error_envelopes(stack: Stack) -> None:
    stack.reset_stats()
    bad = {3, 7, 11, 19, 23}
    handle = stack.client().submit(diffs(30, bad), "Review this diff")
    report = handle.wait(timeout=120).to_dict()
    assert report["status"] == "partial"
    assert (report["succeeded"], report["failed"]) == (25, 5)
    failed = [n for n in report["nodes"] if n["status"] == "error"]
    assert sorted(int(n["input_ref"][3:-5]) for n in failed) == sorted(bad)
    for node in failed:
        assert node["error_kind"] == "bad_request" and node["attempts"] == 1
        assert node["content"] == "" and "400" in node["error"]
    assert "results=25" in report["final"]
    stats = stack.stats()
    assert stats["client_errors"] == 5 and stats["completed"] == 26
    assert report["usage"]["prompt_tokens"] == stats["prompt_tokens"]
    assert report["failures_by_kind"] == {"bad_request": 5}


def test_below_min_success_ratio_fails_without_aggregation(stack: Stack) -> None:
    stack.reset_stats()
    handle = stack.client().submit(diffs(4, {0, 1, 2}), "Review")
    report = handle.wait(timeout=60).to_dict()
    assert report["status"] == "failed" and report["final"] == ""
    assert "1 of 4" in report["error"]
    assert stack.stats()["completed"] == 1  # the aggregation was never called


def run_cli(
    args: list[str], env: dict[str, str], stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "swarm.cli.main", *args],
        env={**os.environ, **env},
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cli_run_status_and_no_wait_through_redis(stack: Stack, tmp_path: Path) -> None:
    files = []
    for i in range(5):
        f = tmp_path / f"in{i}.txt"
        f.write_text(f"document {i}")
        files.append(str(f))
    stack.reset_stats()
    done = run_cli(
        ["run", *files, "-", "--instruction", "Summarise", "--json"],
        stack.env,
        stdin="line one\nline two\n",
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["status"] == "succeeded" and report["total"] == 7
    assert [n["input_ref"] for n in report["nodes"]][-2:] == ["stdin:1", "stdin:2"]
    assert report["usage"]["prompt_tokens"] == stack.stats()["prompt_tokens"]
    # status from another process reads the same report from Redis
    status = run_cli(["status", report["job_id"], "--json"], stack.env)
    assert status.returncode == 0 and json.loads(status.stdout)["job_id"] == report["job_id"]
    # --no-wait prints the id at once; status then follows it to the end
    queued = run_cli(["run", files[0], "--no-wait"], stack.env)
    assert queued.returncode == 0, queued.stderr
    job_id = queued.stdout.strip()
    assert re.fullmatch(r"[0-9a-f]{32}", job_id)
    handle = stack.client().attach(job_id)
    assert handle.wait(timeout=60).to_dict()["status"] == "succeeded"
    text = run_cli(["status", job_id], stack.env)
    assert text.returncode == 0 and "succeeded" in text.stdout and "kimi-k2.5" in text.stdout
    # the key never reaches Redis
    assert API_KEY not in text.stdout + text.stderr


def test_cli_status_pages_through_nodes_and_exports_jsonl(stack: Stack) -> None:
    handle = stack.client().submit(diffs(30, {4, 17, 25}), "Review this diff")
    report = handle.wait(timeout=120).to_dict()
    assert report["status"] == "partial" and len(report["nodes"]) == 30
    job = handle.id
    summary = run_cli(["status", job, "--summary", "--json"], stack.env)
    head = json.loads(summary.stdout)
    assert "nodes" not in head and (head["total"], head["failed"]) == (30, 3)
    failed = json.loads(run_cli(["status", job, "--nodes", "--failed", "--json"], stack.env).stdout)
    assert [n["input_ref"] for n in failed] == ["pr-4.diff", "pr-17.diff", "pr-25.diff"]
    page = run_cli(["status", job, "--nodes", "--limit", "10", "--page", "2", "--json"], stack.env)
    assert json.loads(page.stdout) == report["nodes"][10:20]
    lines = run_cli(["status", job, "--nodes", "--jsonl"], stack.env).stdout.splitlines()
    assert [json.loads(line) for line in lines] == report["nodes"]
    table = run_cli(["status", job, "--nodes", "--offset", "3", "--limit", "2"], stack.env)
    assert table.returncode == 0 and "nodes 4-5" in table.stdout and "pr-4.diff" in table.stdout


def test_cli_unknown_job_and_missing_key(stack: Stack) -> None:
    missing = run_cli(["status", "0" * 32], stack.env)
    assert missing.returncode == 2 and missing.stderr.startswith("swarm: no job")
    assert "Traceback" not in missing.stderr
    env = {**stack.env, "SWARM_API_KEY": "YOUR_HOLYSHEEP_API_KEY"}
    nokey = run_cli(["run", "-"], env, stdin="x\n")
    assert nokey.returncode == 2 and "SWARM_API_KEY" in nokey.stderr
    assert nokey.stderr.count("\n") == 1


def test_the_key_never_reaches_redis(stack: Stack, redis_server) -> None:  # type: ignore[no-untyped-def]
    stack.client().submit(diffs(3), "Review").wait(timeout=60).to_dict()
    client = redis_server.client()
    try:
        for db in range(3):
            client.execute_command("SELECT", db)
            for key in client.scan_iter(count=1000):
                assert API_KEY not in key
                kind = client.type(key)
                values = {
                    "string": lambda k: [client.get(k)],
                    "hash": lambda k: list(client.hgetall(k).values()),
                    "list": lambda k: client.lrange(k, 0, -1),
                    "set": lambda k: list(client.smembers(k)),
                    "zset": lambda k: client.zrange(k, 0, -1),
                    "stream": lambda k: [fields for _, fields in client.xrange(k)],
                    "none": lambda k: [],  # expired between SCAN and TYPE: nothing left to read
                }[kind](key)
                assert not any(API_KEY in str(v) for v in values), key
    finally:
        client.close()
