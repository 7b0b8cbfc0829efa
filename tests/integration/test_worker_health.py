"""The container healthcheck against a real redis-server and Celery worker: it pings only the
named node, returns on its reply (not at its timeout), and says no for a node not there."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import procs

from workers import health


def _health(env: dict[str, str], *argv: str) -> tuple[int, str]:
    done = subprocess.run(
        [sys.executable, "-m", "workers.health", *argv],
        env={**os.environ, **env},
        cwd=procs.REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.returncode, done.stdout + done.stderr


def test_the_local_node_answers_and_a_missing_one_does_not(redis_url: str, tmp_logs: Path) -> None:
    env = {"SWARM_BROKER_URL": redis_url, "SWARM_BASE_URL": "http://127.0.0.1:9/v1"}  # never called
    worker = procs.start_celery_worker(env, None, 2, "health-it@%h", tmp_logs)
    try:
        node = health.node_name("health-it@%h")
        assert _health(env, "health-it@%h") == (0, f"healthy: {node} answered\n")
        status, out = _health(env, "nobody@%h")
        assert status == 1 and "nobody@" in out and "did not answer" in out
        started = time.monotonic()
        assert health.node_alive(redis_url, node, timeout_s=30)
        assert time.monotonic() - started < 15  # returned on the reply, not at the 30 s timeout
    finally:
        worker.terminate()
