"""A benchmark's local processes: a private redis-server, `swarm sim`, Celery workers.

Every process listens on 127.0.0.1 on a port picked here, logs to a file in the run's
folder, and is stopped (SIGTERM, then SIGKILL) when the run ends (swarm.procs supervises them).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from swarm.procs import Process, http_json
from swarm.procs.services import (
    on_free_port,
    spawn_celery_worker,
    start_redis,
    start_sim,
    wait_workers,
)


@contextlib.contextmanager
def redis_server(folder: Path) -> Iterator[str]:
    """A private redis-server; yields its URL (db 0)."""
    proc, port = on_free_port(lambda port: start_redis(folder, port))
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()


class Sim:
    """A running `swarm sim`."""

    def __init__(self, folder: Path, args: Sequence[str]) -> None:
        self.proc, port = on_free_port(lambda port: start_sim(args, folder, port))
        self.root = f"http://127.0.0.1:{port}"
        self.base_url = f"{self.root}/v1"

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
        running.proc.terminate()


@contextlib.contextmanager
def workers(
    folder: Path,
    env: dict[str, str],
    count: int,
    concurrency: int,
    queue: str,
    app: str = "workers",
) -> Iterator[list[Process]]:
    """``count`` `celery -A APP worker` processes of ``concurrency`` threads each, started
    in ``folder``: `python -m celery` puts its working directory first on sys.path, so
    from a checkout the checkout's packages would shadow a PYTHONPATH in ``env`` (a tree
    under test, side by side with another)."""
    procs: list[Process] = []
    try:
        for i in range(count):  # each gets a fresh log: " ready." of an earlier one cannot count
            name = f"bench{i}-{concurrency}@%h"
            procs.append(
                spawn_celery_worker(env, queue, concurrency, name, folder, app=app, cwd=folder)
            )
        wait_workers(procs)
        yield procs
    finally:
        for proc in procs:
            proc.terminate()
