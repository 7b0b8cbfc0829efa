"""Helpers of the failover and partition tests: a job's progress and report read through an
outage, the ledger against the simulator's counts, and workers started in parallel."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import procs
from faults import fields, start_parallel

from swarm.client import JobProgress, SwarmClient, SwarmHandle
from swarm.settings import Settings
from swarm.store.outages import STORE_OUTAGES


def sim_stats(base_url: str) -> dict[str, Any]:
    """The simulator's GET /stats."""
    with urllib.request.urlopen(f"{base_url.removesuffix('/v1')}/stats", timeout=5) as resp:
        stats: dict[str, Any] = json.loads(resp.read())
    return stats


def client_for(env: Mapping[str, str]) -> SwarmClient:
    """A producer with the workers' environment."""
    return SwarmClient.from_settings(Settings(**fields(dict(env))))


def start_workers(
    env: Mapping[str, str], names: Sequence[str], c: int, logs: Path, prefix: Sequence[str] = ()
) -> list[procs.Proc]:
    """Celery workers ``names`` (in parallel); ``prefix`` runs them under a command
    (e.g. ``ip netns exec NS``)."""
    started: dict[str, procs.Proc] = {}

    def start(name: str) -> None:
        extra = list(prefix)
        if extra:
            started[name] = start_prefixed(env, name, c, logs, extra)
        else:
            started[name] = procs.start_celery_worker(env, None, c, f"{name}@%h", logs)

    start_parallel([lambda n=n: start(n) for n in names])  # type: ignore[misc]
    return [started[n] for n in names]


def start_prefixed(
    env: Mapping[str, str], name: str, c: int, logs: Path, prefix: list[str]
) -> procs.Proc:
    """A celery worker run under ``prefix`` (its own process group, as procs' workers)."""
    from swarm.procs.process import unique_log
    from swarm.procs.services import celery_worker_argv, wait_workers

    argv = [*prefix, *celery_worker_argv("workers", None, c, f"{name}@%h", ["-E"])]
    log = unique_log(logs, f"celery-{name}")
    worker = procs.Proc(argv, log, env=dict(env), cwd=procs.REPO_ROOT, name=f"celery-{name}")
    wait_workers([worker], 60)
    return worker


def progress(handle: SwarmHandle) -> JobProgress | None:
    """The job's progress, or None while the store cannot be reached."""
    try:
        return handle.progress()
    except STORE_OUTAGES:
        return None


def done(handle: SwarmHandle) -> int | None:
    """Nodes ended so far, or None while the store cannot be reached."""
    now = progress(handle)
    return None if now is None else now.nodes_done


def wait_report(handle: SwarmHandle, timeout_s: float) -> dict[str, Any]:
    """The job's report, polled through outages until ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            report = handle.report()
        except STORE_OUTAGES:
            report = None
        if report is not None:
            return report.to_dict()
        assert time.monotonic() < deadline, f"no report within {timeout_s} s"
        time.sleep(0.2)


def wait_progress_after(handle: SwarmHandle, seen: int, timeout_s: float) -> float:
    """Seconds until the job has more than ``seen`` nodes ended, or has every node ended
    (read through the outage): a ``seen`` read late may already count every node, and no
    node is then left to end after it. A failure quotes the last progress read."""
    start = time.monotonic()
    last: JobProgress | None = None
    while True:
        last = progress(handle) or last
        if last is not None and (last.nodes_done > seen or last.ended >= last.nodes_total):
            return time.monotonic() - start
        assert time.monotonic() - start < timeout_s, (
            f"no progress past {seen} in {timeout_s} s; last read: {last}"
        )
        time.sleep(0.05)


@dataclass(frozen=True)
class Tally:
    """What the ledger counted and what the simulator served."""

    ledger_calls: int
    ledger_prompt: int
    ledger_completion: int
    sim_completed: int
    sim_prompt: int
    sim_completion: int

    @property
    def equal(self) -> bool:
        return (self.ledger_calls, self.ledger_prompt, self.ledger_completion) == (
            self.sim_completed,
            self.sim_prompt,
            self.sim_completion,
        )


def tally(client: SwarmClient, job_id: str, stats: dict[str, Any]) -> Tally:
    lines = client.store.ledger(job_id).values()
    return Tally(
        ledger_calls=sum(line.calls for line in lines),
        ledger_prompt=sum(line.usage.prompt_tokens for line in lines),
        ledger_completion=sum(line.usage.completion_tokens for line in lines),
        sim_completed=int(stats["completed"]),
        sim_prompt=int(stats["prompt_tokens"]),
        sim_completion=int(stats["completion_tokens"]),
    )


def settled_tally(client: SwarmClient, job_id: str, stats: Any, timeout_s: float = 30.0) -> Tally:
    """The tally once the ledger and the simulator agree (answers still in flight when the
    report was written are recorded when they come), or the last one at the deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        last = tally(client, job_id, stats())
        if last.equal or time.monotonic() > deadline:
            return last
        time.sleep(0.2)
