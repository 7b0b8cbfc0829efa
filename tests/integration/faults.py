"""Helpers of the reliability tests: a stack whose workers get fault-friendly
settings, workers started in parallel, and counts read from worker logs and Redis."""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import procs
import redis
from stack import API_KEY, Stack, running_stack
from test_cost_budget_e2e import roomy_catalog as cost_budget_catalog

from swarm.client import SwarmClient
from swarm.errors import JobTimeoutError
from swarm.records import InputItem
from swarm.settings import Settings

FAST_RECOVERY = {
    # Longest task: 1 x (4 + 0.25) s + a 0.5 s admission countdown = 4.75 s < the 5 s
    # visibility timeout, so a killed worker's tasks are back in their queue 5-6 s after
    # delivery, and the watchdog calls a job stalled after 2 x 5 + 2 x 1 + 2 = 14 s.
    "SWARM_NODE_TIMEOUT_S": "4",
    "SWARM_MAX_ATTEMPTS": "1",
    "SWARM_BACKOFF_MAX_S": "0.25",
    "SWARM_ADMISSION_MAX_COUNTDOWN_S": "0.5",
    "SWARM_VISIBILITY_TIMEOUT_S": "5",
    "SWARM_UNACKED_RESTORE_INTERVAL_S": "1",
    "SWARM_NODES_PER_TASK": "4",
}
"""Worker and producer settings that make a killed worker's recovery quick."""


def roomy_catalog(path: Path) -> Path:
    """The roomy catalog (limits far above a test's load), per-second limits too."""
    cost_budget_catalog(path)
    path.write_text(re.sub(r"(?m)^rps = .*$", "rps = 10_000_000", path.read_text()))
    return path


@dataclass
class FaultStack:
    """A Stack plus the environment its workers get, and named workers."""

    stack: Stack
    env: dict[str, str]
    logs: Path
    named: dict[str, procs.Proc] = field(default_factory=dict)

    def settings(self, **env: str) -> Settings:
        """The producer's settings: the workers' environment (SWARM_*, ``env`` over it)."""
        return Settings(**fields({**self.env, **env}))

    def client(self, **env: str) -> SwarmClient:
        return SwarmClient.from_settings(self.settings(**env))

    def ensure_workers(
        self, names: Sequence[str], c: int, env: dict[str, str] | None = None
    ) -> list[procs.Proc]:
        """The named workers, starting (in parallel, with ``env`` over the stack's) those
        not running."""
        missing = [n for n in names if n not in self.named or not self.named[n].alive]
        full_env = {**self.env, **(env or {})}
        start_parallel([lambda n=n: self._start(n, c, full_env) for n in missing])  # type: ignore[misc]
        return [self.named[n] for n in names]

    def wait_restarting(
        self, handle: Any, names: Sequence[str], c: int, timeout: float, allowed: str
    ) -> Any:
        """``handle.wait(timeout)``, meanwhile starting again a named worker that died with
        ``allowed`` in its log (what Docker's restart policy does for an operator); a worker
        that died of anything else fails the test at once."""
        deadline = time.monotonic() + timeout
        while True:
            for name in names:
                worker = self.named.get(name)
                if worker is not None and not worker.alive:
                    assert allowed in worker.log_text(), worker.log_tail()
            self.ensure_workers(names, c)
            try:
                return handle.wait(timeout=min(2.0, max(0.1, deadline - time.monotonic())))
            except JobTimeoutError:
                if time.monotonic() >= deadline:
                    raise

    def _start(self, name: str, c: int, env: dict[str, str]) -> None:
        worker = procs.start_celery_worker(env, None, c, f"{name}@%h", self.logs)
        self.named[name] = worker
        self.stack.workers.append(worker)

    def stack_redis(self, db: int) -> redis.Redis:
        """A client (decoded strings) on ``db`` of the stack's Redis; close it."""
        return redis.Redis.from_url(procs.with_db(self.stack.broker_url, db), decode_responses=True)

    def stop_others(self, keep: Iterable[str]) -> None:
        """Stop every named worker not in ``keep``."""
        for name, proc in list(self.named.items()):
            if name not in keep:
                proc.terminate(30)
                del self.named[name]


@dataclass(frozen=True)
class BrokerStack:
    """What a module's stack on each broker runs (its ``BROKER_STACK``, read by the
    ``broker_fs`` fixture of tests/integration/conftest.py)."""

    name: str
    """Prefix of the stack's log folder."""
    sim_args: tuple[str, ...]
    env: Mapping[str, str]


@contextlib.contextmanager
def fault_stack(
    redis_server: Any,
    logs: Path,
    sim_args: list[str],
    env: dict[str, str],
    broker_url: str | None = None,
) -> Iterator[FaultStack]:
    """A module's stack on the session's (flushed) Redis: the simulator with ``sim_args``, and
    workers (started by the tests) with ``env`` and a roomy catalog. ``broker_url`` (e.g. an
    amqp:// vhost) replaces the Redis broker; the job store stays on Redis (db 1)."""
    if broker_url is not None:
        env = {**env, "SWARM_RESULT_URL": redis_server.url_for(1)}
    catalog = roomy_catalog(logs / "catalog.toml")
    with running_stack(redis_server, logs, sim_args, broker_url=broker_url) as st:
        yield FaultStack(st, {**st.env, **env, "SWARM_CONFIG": str(catalog)}, logs)


def fields(env: dict[str, str]) -> dict[str, str]:
    """SWARM_* environment variables as Settings field names."""
    return {k.removeprefix("SWARM_").lower(): v for k, v in env.items() if k.startswith("SWARM_")}


def start_parallel(starters: list[Callable[[], None]]) -> None:
    """Run the starters in threads; re-raise the first failure."""
    errors: list[BaseException] = []

    def run(fn: Callable[[], None]) -> None:
        try:
            fn()
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(fn,)) for fn in starters]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def inputs(n: int, marker: str = "") -> list[InputItem]:
    return [InputItem(ref=f"doc-{i:04d}", text=f"document {i}: {marker}") for i in range(n)]


_TASK_LINE = r"Task swarm\.subagents?\[({job}-[^\]]+)\] {event}"


def task_lines(log: str, job_id: str, event: str) -> set[str]:
    """Ids of the job's sub-agent tasks (one node or several) that a worker log shows as
    ``event`` (received, succeeded)."""
    return set(re.findall(_TASK_LINE.format(job=re.escape(job_id), event=event), log))


def nodes_of(task_ids: Iterable[str], job_id: str, node_ids: Sequence[str]) -> set[str]:
    """The nodes the given task ids carry (``<job>-<node>`` or ``<job>-<first>-<last>``, a
    ``-r1``/``-w1`` suffix ignored); a several-node task of a one-model job spans first..last."""
    found: set[str] = set()
    for task_id in task_ids:
        parts = [p for p in task_id.removeprefix(f"{job_id}-").split("-") if p in node_ids]
        start, end = node_ids.index(parts[0]), node_ids.index(parts[-1])
        found.update(node_ids[start : end + 1])
    return found


def aggregate_runs(workers: Iterable[procs.Proc], job_id: str, settle_s: float = 5.0) -> int:
    """How many times a worker logged the job's aggregation as succeeded."""
    pattern = rf"Task swarm\.aggregate\[{re.escape(job_id)}-aggregate[^\]]*\] succeeded"
    procs_list = list(workers)
    deadline = time.monotonic() + settle_s
    found = 0
    while time.monotonic() < deadline:
        found = sum(len(re.findall(pattern, p.log_text())) for p in procs_list)
        if found:
            break
        time.sleep(0.1)
    time.sleep(0.5)  # stragglers
    return sum(len(re.findall(pattern, p.log_text())) for p in procs_list)


def wait_until(check: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def rss_mib(pid: int) -> float:
    """Resident memory of a process in MiB (Linux /proc)."""
    text = Path(f"/proc/{pid}/status").read_text()
    return int(text.split("VmRSS:")[1].split()[0]) / 1024


__all__ = ["API_KEY", "FAST_RECOVERY", "FaultStack", "roomy_catalog"]
