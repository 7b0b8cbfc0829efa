"""A whole swarm deployment as local processes: simulator, Celery workers, and a producer
client, all on the session's private Redis.

A test module declares its stack once, ``stack = stack_fixture(SIM_ARGS, Worker("w1"), ...)``:
the fixture empties Redis, starts the simulator and the workers (in parallel), and at the end
stops them all.
"""

from __future__ import annotations

import contextlib
import gc
import json
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import procs
import pytest

from swarm.client import SwarmClient
from swarm.procs.services import spawn_celery_worker, wait_workers
from swarm.settings import Settings

API_KEY = "sk-swarm-test-not-a-real-key"


@dataclass
class Stack:
    """Running processes and how to reach them."""

    broker_url: str
    base_url: str
    sim: procs.Proc
    workers: list[procs.Proc] = field(default_factory=list)

    @property
    def env(self) -> dict[str, str]:
        """The environment every swarm process of this stack gets."""
        return {
            "SWARM_BROKER_URL": self.broker_url,
            "SWARM_BASE_URL": self.base_url,
            "SWARM_API_KEY": API_KEY,
            "SWARM_NODE_TIMEOUT_S": "10",
        }

    def settings(self, **overrides: Any) -> Settings:
        return Settings(
            broker_url=self.broker_url,
            base_url=self.base_url,
            api_key=API_KEY,  # type: ignore[arg-type]
            node_timeout_s=10,
            **overrides,
        )

    def client(self) -> SwarmClient:
        return SwarmClient.from_settings(self.settings())

    def stats(self) -> dict[str, Any]:
        root = self.base_url.removesuffix("/v1")
        with urllib.request.urlopen(f"{root}/stats", timeout=5) as resp:
            return json.loads(resp.read())  # type: ignore[no-any-return]

    def reset_stats(self) -> None:
        root = self.base_url.removesuffix("/v1")
        req = urllib.request.Request(f"{root}/stats/reset", method="POST")
        urllib.request.urlopen(req, timeout=5).close()

    def add_worker(
        self, name: str, log_dir: Path, queues: str | None = None, c: int = 16
    ) -> procs.Proc:
        worker = procs.start_celery_worker(self.env, queues, c, f"{name}@%h", log_dir)
        self.workers.append(worker)
        return worker

    def worker_logs(self) -> str:
        return "\n".join(w.log_text() for w in self.workers)

    def stop(self) -> None:
        for proc in [*self.workers, self.sim]:
            proc.terminate(10)


def start_stack(broker_url: str, log_dir: Path, sim_args: list[str]) -> Stack:
    sim, base_url = procs.start_sim(sim_args, log_dir)
    return Stack(broker_url=broker_url, base_url=base_url, sim=sim)


@dataclass(frozen=True)
class Worker:
    """A Celery worker of a stack: its name (``-n NAME@%h``), queues (None: every queue of
    the catalog), threads and environment over the stack's."""

    name: str
    queues: str | None = None
    c: int = 16
    env: Mapping[str, str] = field(default_factory=dict)


@contextlib.contextmanager
def running_stack(
    redis_server: Any,
    logs: Path,
    sim_args: list[str],
    workers: Sequence[Worker] = (),
    env: Mapping[str, str] | None = None,
    broker_url: str | None = None,
) -> Iterator[Stack]:
    """A stack on the emptied session Redis: the simulator with ``sim_args`` and ``workers``
    (``env`` over the stack's environment, each worker's own over that), ready.
    ``broker_url`` (e.g. an amqp:// vhost) replaces Redis as the broker."""
    procs.flush(redis_server)
    st = start_stack(broker_url or redis_server.url, logs, sim_args)
    try:
        spawned = [
            spawn_celery_worker(
                {**st.env, **(env or {}), **w.env}, w.queues, w.c, f"{w.name}@%h", logs,
                extra=["-E"], cwd=procs.REPO_ROOT,
            )
            for w in workers
        ]  # fmt: skip
        st.workers += spawned
        wait_workers(spawned)
        yield st
    finally:
        gc.collect()  # Celery AsyncResults unsubscribe when collected: while Redis runs
        st.stop()


def local_catalog(path: Path, text: str | None = None) -> Path:
    """``text`` (default: the packaged catalog) with its backend declared ``kind = "local"``
    (the local call path: pacing, overtime, adaptive in-flight limit), written to ``path``."""
    if text is None:
        text = resources.files("swarm.data").joinpath("catalog.toml").read_text("utf-8")
    local = text.replace('kind = "hosted"', 'kind = "local"')
    assert local != text, "the catalog declares no hosted backend to turn local"
    path.write_text(local, "utf-8")
    return path


def stack_fixture(
    sim_args: list[str],
    *workers: Worker,
    env: Mapping[str, str] | None = None,
    scope: Literal["module", "function"] = "module",
    local: bool = False,
) -> Callable[..., Iterator[Stack]]:
    """The ``stack`` fixture of a test module (see ``running_stack``). Its logs go to a
    folder of the module, or to the test's ``tmp_logs`` when ``scope="function"`` (so a
    failing test's report shows them). ``local``: the workers read the packaged catalog
    with its backend declared local (``local_catalog``)."""

    @pytest.fixture(scope=scope, name="stack")
    def stack(request: pytest.FixtureRequest, redis_server: Any) -> Iterator[Stack]:
        if scope == "function":
            logs = request.getfixturevalue("tmp_logs")
        else:
            logs = request.getfixturevalue("tmp_path_factory").mktemp("stack-logs")
        extra = dict(env or {})
        if local:
            extra["SWARM_CONFIG"] = str(local_catalog(logs / "catalog-local.toml"))
        with running_stack(redis_server, logs, sim_args, workers, extra) as running:
            yield running

    return stack
