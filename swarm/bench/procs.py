"""Local processes for a benchmark: a private redis-server, `swarm sim`, Celery workers.

Every process listens on 127.0.0.1 on a port picked here, logs to a file in the run's
folder, and is stopped (SIGTERM, then SIGKILL) when the run ends.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

START_TIMEOUT_S = 60.0
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def free_port() -> int:
    """A loopback TCP port that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def http_json(url: str, method: str = "GET") -> dict[str, Any]:
    """GET or POST ``url`` on loopback (no proxy) and decode its JSON."""
    request = urllib.request.Request(url, method=method)
    with _NO_PROXY.open(request, timeout=10) as resp:
        return json.loads(resp.read() or b"{}")  # type: ignore[no-any-return]


class Proc:
    """A child process in its own process group, output to ``log``."""

    def __init__(self, argv: Sequence[str], log: Path, env: dict[str, str] | None = None):
        self.log = log
        with open(log, "ab") as out:
            self.popen = subprocess.Popen(
                list(argv),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"},
                start_new_session=True,
            )

    def wait_for(self, text: str, timeout_s: float = START_TIMEOUT_S) -> None:
        """Wait until ``text`` appears in the log; RuntimeError if the process exits first."""
        deadline = time.monotonic() + timeout_s
        while text not in self.log.read_text("utf-8", "replace"):
            if self.popen.poll() is not None or time.monotonic() > deadline:
                tail = self.log.read_text("utf-8", "replace")[-2000:]
                raise RuntimeError(f"{self.popen.args!r} did not log {text!r}:\n{tail}")
            time.sleep(0.1)

    def stop(self) -> None:
        """SIGTERM the group, SIGKILL after 10 s."""
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(10)


@contextlib.contextmanager
def redis_server(folder: Path) -> Iterator[str]:
    """A private redis-server; yields its URL (db 0)."""
    port = free_port()
    argv = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
    proc = Proc([*argv, "--appendonly", "no", "--dir", str(folder)], folder / "redis.log")
    try:
        proc.wait_for("Ready to accept connections")
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.stop()


class Sim:
    """A running `swarm sim`."""

    def __init__(self, folder: Path, args: Sequence[str]) -> None:
        port = free_port()
        self.root = f"http://127.0.0.1:{port}"
        self.base_url = f"{self.root}/v1"
        argv = [sys.executable, "-m", "swarm.cli.main", "sim", "--port", str(port), *args]
        self.proc = Proc(argv, folder / f"sim-{port}.log")
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            with contextlib.suppress(OSError):
                http_json(f"{self.root}/health")
                break
            if time.monotonic() > deadline or self.proc.popen.poll() is not None:
                raise RuntimeError(f"simulator did not start; see {self.proc.log}")
            time.sleep(0.1)

    def stats(self) -> dict[str, Any]:
        """GET /stats."""
        return http_json(f"{self.root}/stats")

    def reset(self) -> None:
        """POST /stats/reset."""
        http_json(f"{self.root}/stats/reset", method="POST")


@contextlib.contextmanager
def sim(folder: Path, args: Sequence[str]) -> Iterator[Sim]:
    """`swarm sim` with ``args`` on a free port."""
    running = Sim(folder, args)
    try:
        yield running
    finally:
        running.proc.stop()


@contextlib.contextmanager
def workers(
    folder: Path,
    env: dict[str, str],
    count: int,
    concurrency: int,
    queue: str,
    app: str = "workers",
) -> Iterator[list[Proc]]:
    """``count`` `celery -A APP worker` processes of ``concurrency`` threads each."""
    procs: list[Proc] = []
    run = time.monotonic_ns()  # a fresh log per start: " ready." of an earlier one must not count
    try:
        for i in range(count):
            argv = [sys.executable, "-m", "celery", "-A", app, "worker", "-P", "threads"]
            argv += ["-c", str(concurrency), "-n", f"bench{i}-{concurrency}@%h", "-Q", queue]
            argv += ["--without-gossip", "--without-mingle", "--loglevel=INFO"]
            log = folder / f"{app}-worker{i}-c{concurrency}-{run}.log"
            procs.append(Proc(argv, log, env))
        for proc in procs:
            proc.wait_for(" ready.")
        yield procs
    finally:
        for proc in procs:
            proc.stop()
