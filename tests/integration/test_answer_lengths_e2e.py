"""A finished job teaches its models' answer lengths to the next pre-flight: the worker's
aggregation adds them to Redis, and a producer's estimate line expects them."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import redis
from stack import Stack, Worker, stack_fixture

from swarm.store.answer_lengths import KEY, MIN_CALLS

pytestmark = pytest.mark.integration

stack = stack_fixture(["--seed", "7"], Worker("w1", "llm.kimi-k2.5", c=4))


def swarm(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "swarm.cli.main", *args], env=env, capture_output=True,
        text=True, timeout=180,
    )  # fmt: skip


def expected_usd(stderr: str) -> float:
    found = re.search(r"estimate: expected ~\$(\d+\.\d+)", stderr)
    assert found is not None, stderr
    return float(found.group(1))


def test_a_finished_job_sets_the_answer_length_the_next_estimate_expects(
    stack: Stack, tmp_path: Path
) -> None:
    import os

    files = []
    for i in range(MIN_CALLS):
        path = tmp_path / f"doc{i}.txt"
        path.write_text(f"document {i}")
        files.append(str(path))
    env = {**os.environ, **stack.env, "SWARM_ESTIMATE_NOTICE_USD": "0"}
    first = swarm(["run", *files, "--json"], env)
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    answers = [node["usage"]["completion_tokens"] for node in report["nodes"]]
    store = redis.Redis.from_url(stack.env["SWARM_BROKER_URL"].rsplit("/", 1)[0] + "/1")
    learned = store.hgetall(KEY)
    store.close()
    assert int(learned[b"kimi-k2.5|*|calls"]) == MIN_CALLS
    assert int(learned[b"kimi-k2.5|*|tokens"]) == sum(answers)
    second = swarm(["run", *files, "--no-wait"], env)
    assert second.returncode == 0, second.stderr
    assert expected_usd(second.stderr) != expected_usd(first.stderr)  # learned, not assumed
