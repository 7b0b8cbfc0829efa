"""`swarm bench peers`: the seeds' own asyncio + semaphore script and swarm on the same
faulty or capped gateway, side by side.

Each row is one gateway (a `swarm sim` setting, the same fault seed for both clients); each
client gets a fresh simulator, so neither inherits the other's windows or fault draws. The
script is swarm.bench.baseline (seed 000's aiohttp + asyncio.Semaphore client, 5 tries on
429 and 5xx honouring Retry-After, then one aggregation call). Swarm runs the same job on 2
worker processes (``-c`` = concurrency / 2, a Redis broker), with a catalog stating the
row's real limits, and is timed from submit to report (see run_swarm for its warm-up).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from swarm.bench import procs
from swarm.bench.baseline import run_baseline
from swarm.bench.swarm_load import close_client, inputs
from swarm.bench.sweep import (
    MODEL,
    QUEUE,
    WINDOW_CLEAR_S,
    bench_catalog,
    swarm_env,
    swarm_settings,
)
from swarm.client import SwarmClient

WORKERS = 2
FAULT_SEED = ["--seed", "7"]
UNLIMITED_RPM = 1_000_000


@dataclass(frozen=True)
class Gateway:
    """One row: the simulator's setting and the catalog limits that state it."""

    name: str
    sim_args: tuple[str, ...]
    key: str = ""
    """Short name for ``swarm bench peers --only`` (the row's number works too)."""
    inputs: int = 100
    concurrency: int = 50
    rpm: int | None = None
    """The gateway's requests per minute, as the catalog states it (None: no limit)."""
    rps: int | None = None
    """Its requests per second (None: no limit)."""
    window: str = "bucket"
    """How the catalog says the gateway counts (``bucket``, ``sliding`` or ``fixed``)."""
    clean: bool = False
    """No faults and no cap: swarm's orchestration is all the difference."""

    @property
    def capped(self) -> bool:
        """The gateway enforces a limit (swarm must then see fewer 429s)."""
        return self.rpm is not None or self.rps is not None

    @property
    def wall_target(self) -> float:
        """Swarm's wall may be at most this many times the script's: 1.5 on a clean
        gateway (orchestration), 1.2 on a faulty or capped one (the reaction)."""
        return 1.5 if self.clean else 1.2


CLEAN = ("--latency-ms", "200")
ROWS: tuple[Gateway, ...] = (
    Gateway("clean, 0.2 s", CLEAN, key="clean", clean=True),
    Gateway(
        "10% 429 (Retry-After 1 s) + 10% 5xx",
        (*CLEAN, "--rate-limit-rate", "0.1", "--error-rate", "0.1"),
        key="noisy",
    ),
    Gateway(
        "30% 429 + 30% 5xx + 2% garbage + 2% resets",
        (
            *CLEAN,
            "--rate-limit-rate",
            "0.3",
            "--error-rate",
            "0.3",
            "--bad-json-rate",
            "0.02",
            "--drop-rate",
            "0.02",
        ),
        key="faulty",
    ),
    Gateway(
        "60 RPM cap (60 per 60-s window)",
        (*CLEAN, "--rpm", "60"),
        key="rpm-cap",
        rpm=60,
        window="sliding",
    ),
    Gateway(
        "seed-like: 80 req/s cap, p50 720 / p99 1850 ms, slower past 50 in flight",
        (
            "--latency-p50-ms",
            "720",
            "--latency-p99-ms",
            "1850",
            "--rps",
            "80",
            "--knee-inflight",
            "50",
        ),
        key="seed-like",
        inputs=200,
        concurrency=100,
        rps=80,
        window="sliding",
    ),
    Gateway(
        "hosted-like: 30% 429 + 30% 5xx at once, answers after 0.2 s",
        (*CLEAN, "--fast-errors", "--rate-limit-rate", "0.3", "--error-rate", "0.3"),
        key="fast-errors",
    ),
)


def pick_rows(only: str) -> list[Gateway]:
    """The rows ``only`` names (numbers from 1 or keys, comma-separated; empty: all)."""
    names = [part.strip() for part in only.split(",") if part.strip()]
    if not names:
        return list(ROWS)
    by_key = {gw.key: gw for gw in ROWS} | {str(i): gw for i, gw in enumerate(ROWS, 1)}
    unknown = [name for name in names if name not in by_key]
    if unknown:
        known = ", ".join(f"{i} {gw.key}" for i, gw in enumerate(ROWS, 1))
        raise ValueError(f"unknown row {unknown[0]!r}; rows: {known}")
    return [by_key[name] for name in names]


def merge_table(previous: str, table: str) -> str:
    """``table``'s rows in place of the same gateways' rows of ``previous`` (a table of
    the same columns), the others kept; rows of new gateways are added in ROWS order."""
    header, fresh = _split(table)
    _, old = _split(previous)
    rows = {**old, **fresh}
    order = [gw.name for gw in ROWS if gw.name in rows]
    order += [name for name in rows if name not in order]
    return "\n".join([*header, *(rows[name] for name in order)]) + "\n"


def _split(table: str) -> tuple[list[str], dict[str, str]]:
    """A markdown table's two header lines and its rows by their first cell."""
    lines = [line for line in table.splitlines() if line.startswith("|")]
    rows = {line.split("|")[1].strip(): line for line in lines[2:]}
    return lines[:2], rows


@dataclass(frozen=True)
class Run:
    """One client on one gateway."""

    ok: int
    total: int
    wall_s: float
    rate_limited: int
    """429s the gateway answered during the run."""


@dataclass(frozen=True)
class Result:
    """Both clients on one gateway, per round."""

    gateway: Gateway
    script: list[Run] = field(default_factory=list)
    swarm: list[Run] = field(default_factory=list)


def catalog(folder: Path, gw: Gateway) -> Path:
    """A one-model catalog stating the row's limits (far above the load where it has none)."""
    rpm = gw.rpm or UNLIMITED_RPM
    return bench_catalog(folder, rpm=rpm, rps=gw.rps, max_inflight=10_000, window=gw.window)


def run_script(folder: Path, gw: Gateway) -> Run:
    """The seeds' script against a fresh simulator."""
    with procs.sim(folder, [*gw.sim_args, *FAULT_SEED]) as sim:
        run = run_baseline(sim.base_url, MODEL, gw.inputs, gw.concurrency, aggregate=True)
        limited = int(sim.stats()["rate_limited"])
    ok = sum(1 for r in run.results[:-1] if r.ok)
    return Run(ok, gw.inputs, run.elapsed_s, limited)


def run_swarm(folder: Path, redis_url: str, gw: Gateway) -> Run:
    """Swarm on 2 workers against a fresh simulator, submit to report. A job of the same
    size warms the workers first (a deployment's workers are long-lived: node threads,
    their connections and lazy imports are made once), then the gateway's 1 s windows
    clear; under a per-minute cap it would spend the cap's window, so the workers start
    cold there."""
    with procs.sim(folder, [*gw.sim_args, *FAULT_SEED]) as sim:
        env = swarm_env(redis_url, sim.base_url, catalog(folder, gw), gw.concurrency // WORKERS)
        with procs.workers(folder, env, WORKERS, gw.concurrency // WORKERS, QUEUE):
            client = SwarmClient.from_settings(swarm_settings(env))
            if gw.rpm is None:
                client.submit(inputs(gw.inputs), "Warm up").wait(timeout=300)
                time.sleep(WINDOW_CLEAR_S)
                sim.reset()
            started = time.perf_counter()
            report = (
                client.submit(inputs(gw.inputs), "Review this diff").wait(timeout=900).to_dict()
            )
            wall = time.perf_counter() - started
            close_client(client)
            limited = int(sim.stats()["rate_limited"])
    return Run(int(report["succeeded"]), gw.inputs, wall, limited)


def run_peers(folder: Path, rows: Sequence[Gateway], rounds: int) -> list[Result]:
    """Every row, ``rounds`` times, script then swarm."""
    results = [Result(gw) for gw in rows]
    with procs.redis_server(folder) as redis_url:
        for _ in range(rounds):
            for result in results:
                result.script.append(run_script(folder, result.gateway))
                result.swarm.append(run_swarm(folder, redis_url, result.gateway))
    return results
