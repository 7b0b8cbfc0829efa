"""The project's services as supervised processes: redis-server, `swarm sim`, Celery workers.

Each starter returns once its process is ready (redis logged that it accepts connections, the
simulator answers GET /health, the worker logged ``ready.``) and stops the process when it is
not. Starters that pick the port themselves start again on another port when the child lost
the race for the one they picked.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from swarm.errors import ProcessError
from swarm.procs.ports import LOOPBACK, free_port, http_status
from swarm.procs.process import START_TIMEOUT_S, Process, unique_log
from swarm.procs.ready import wait_ready

log = logging.getLogger(__name__)

CELERY_READY = re.compile(r"\S+@\S+ ready\.")
REDIS_READY = re.compile(r"Ready to accept connections")
PORT_ATTEMPTS = 3


def on_free_port(
    start: Callable[[int], Process], port: int | None = None, attempts: int = PORT_ATTEMPTS
) -> tuple[Process, int]:
    """``start(port)`` on ``port``, or on a free port, retried on another when it is lost;
    the started process and its port."""
    for attempt in range(1 if port is not None else attempts):
        chosen = port if port is not None else free_port()
        try:
            return start(chosen), chosen
        except ProcessError as exc:
            if port is not None or attempt == attempts - 1 or "in use" not in str(exc).lower():
                raise
            log.debug("port taken before the child bound it; another port: %s", exc)
    raise AssertionError("unreachable")


def started(proc: Process, ready: Callable[[], bool], timeout_s: float, what: str) -> Process:
    """``proc`` once ``ready()``; killed (and the error raised) when it is not."""
    try:
        proc.wait_ready(ready, timeout_s, what)
    except BaseException:
        proc.kill()
        raise
    return proc


def redis_argv(port: int, folder: Path, extra: Sequence[str] = ()) -> list[str]:
    """redis-server on 127.0.0.1:``port``, data in ``folder``, no snapshots, logs to stdout."""
    return [
        "redis-server", "--port", str(port), "--bind", LOOPBACK, "--save", "",
        "--appendonly", "no", "--dir", str(folder), "--daemonize", "no", "--logfile", "",
        *extra,
    ]  # fmt: skip


def start_redis(
    folder: Path,
    port: int,
    *,
    log_dir: Path | None = None,
    extra: Sequence[str] = (),
    timeout_s: float = START_TIMEOUT_S,
) -> Process:
    """redis-server on ``port`` (see ``redis_argv``), once it accepts connections."""
    log_path = unique_log(log_dir or folder, f"redis-{port}")
    proc = Process(redis_argv(port, folder, extra), log_path, name=f"redis-{port}")
    accepting = lambda: REDIS_READY.search(proc.log_text()) is not None  # noqa: E731
    return started(proc, accepting, timeout_s, "accepting connections")


def start_sim(
    args: Sequence[str],
    log_dir: Path,
    port: int,
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout_s: float = START_TIMEOUT_S,
) -> Process:
    """`swarm sim --port PORT ARGS`, once GET /health answers 200."""
    argv = [sys.executable, "-m", "swarm.cli.main", "sim", "--port", str(port), *args]
    name = f"sim-{port}"
    proc = Process(argv, unique_log(log_dir, name), env=env, cwd=cwd, name=name)
    health = f"http://{LOOPBACK}:{port}/health"
    return started(proc, lambda: http_status(health, 1.0) == 200, timeout_s, "answering /health")


def celery_worker_argv(
    app: str, queues: str | None, concurrency: int, hostname: str, extra: Sequence[str] = ()
) -> list[str]:
    """``celery -A APP worker``: threads pool, no gossip or mingle (quick to start)."""
    argv = [
        sys.executable, "-m", "celery", "-A", app, "worker", "--loglevel=INFO",
        "-P", "threads", "-c", str(concurrency), "-n", hostname,
        "--without-gossip", "--without-mingle",
    ]  # fmt: skip
    return [*argv, *(["-Q", queues] if queues else []), *extra]


def spawn_celery_worker(
    env: Mapping[str, str],
    queues: str | None,
    concurrency: int,
    hostname: str,
    log_dir: Path,
    *,
    app: str = "workers",
    extra: Sequence[str] = (),
    cwd: Path | None = None,
) -> Process:
    """A Celery worker, started, not yet ready (see ``CELERY_READY``)."""
    argv = celery_worker_argv(app, queues, concurrency, hostname, extra)
    node = hostname.replace("%h", "").replace("%n", "").strip("@.")
    name = f"celery-{node}" if app == "workers" else f"celery-{app}-{node}"
    return Process(argv, unique_log(log_dir, name), env=env, cwd=cwd, name=name)


def wait_workers(workers: Sequence[Process], timeout_s: float = START_TIMEOUT_S) -> None:
    """Wait until every worker logged ``ready.``; on failure all of them are killed."""

    def logged(proc: Process) -> Callable[[], bool]:
        return lambda: CELERY_READY.search(proc.log_text()) is not None

    try:
        wait_ready([w.readiness(logged(w)) for w in workers], timeout_s, "ready")
    except BaseException:
        for worker in workers:
            worker.kill()
        raise
