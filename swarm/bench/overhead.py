"""`swarm bench overhead`: orchestration overhead, tail latency, throughput and memory,
a plain Celery chord (swarm.bench.plain_chord) and swarm side by side, in one run.

Everything runs on this machine: one redis-server, `swarm sim` per scenario, and worker
processes started per client (two, threads pool, ``-c 50``, unless said otherwise). Swarm
runs with admission on but a one-model catalog whose limits are far above the load
(swarm.bench.sweep.bench_catalog), so the numbers measure orchestration, not the
catalog's kimi-k2.5 spacing (80 requests/s). Scenarios:

    a  100 nodes at a fixed 1.0 s latency plus a 1.0 s aggregation: wall / ideal 2.0 s
    b  100 nodes under seed 000's latency (p50 1.18 s, p99 2.38 s) plus a 1.0 s
       aggregation, swarm with and without hedging: wall / p50, extra calls
    b' the same with 2% of requests hung (a straggler a hedge can rescue)
    c  2,000 nodes at 0 ms: sub-agent calls per second, submit to final result
    d  one worker -c 100 holding 100 calls of 3 s: its peak RSS
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from celery import chord

from swarm.bench import plain_chord, procs
from swarm.bench.sweep import QUEUE, bench_catalog, swarm_env, swarm_settings
from swarm.client import SwarmClient
from swarm.records import InputItem

P50_S = 1.18
SEED_000 = ["--latency-p50-ms", "1180", "--latency-p99-ms", "2380", "--seed", "0"]
AGGREGATE_1S = "Merge the results. [[sim:latency_ms=1000]]"
HEDGE_ENV = {"SWARM_HEDGE_QUANTILE": "0.95", "SWARM_HEDGE_MAX_RATIO": "0.1"}
"""Hedging as the bench runs it: after the model's observed p95, at most 10% of nodes
(about 5% of calls pass the p95, so the cap is not spent before the real stragglers)."""
TIMEOUT_S = 600.0


@dataclass(frozen=True)
class Row:
    """One measured line: a scenario, a client, and what was measured."""

    scenario: str
    client: str
    value: float
    """The scenario's figure (wall ratio, calls/s, MB)."""
    unit: str
    detail: str = ""
    """Raw numbers behind the figure."""


def texts(count: int, tag: str) -> list[str]:
    """Small distinct review inputs (distinct per run, so no answer is reused)."""
    return [f"diff --git a/f{i}.py\n+x = {i}  # {tag}\n" for i in range(count)]


@dataclass
class Bench:
    """One benchmark run's folder, Redis and settings."""

    folder: Path
    redis_url: str
    repeat: int
    pids: list[int] = field(default_factory=list)
    """Worker processes of the client running now."""

    def catalog(self) -> Path:
        return bench_catalog(self.folder, rpm=60_000_000, rps=None, max_inflight=100_000)

    # -- the two clients --
    @contextmanager
    def swarm(
        self,
        sim: procs.Sim,
        extra: dict[str, str] | None = None,
        count: int = 2,
        c: int = 50,
        catalog: Path | None = None,
    ) -> Iterator[Callable[[list[str], str], float]]:
        """Swarm workers; yields ``run(inputs, aggregate) -> wall seconds`` (report seen).
        ``catalog``: the workers' and the producer's SWARM_CONFIG (default: the bench's
        one-model catalog of far-away limits)."""
        env = swarm_env(self.redis_url, sim.base_url, catalog or self.catalog(), c)
        env.update(extra or {})
        env["SWARM_NODE_TIMEOUT_S"] = str(plain_chord.TIMEOUT_S)
        with procs.workers(self.folder, env, count, c, QUEUE) as running:
            client = SwarmClient.from_settings(swarm_settings(env))
            self.pids = [p.pid for p in running]

            def run(inputs: list[str], aggregate: str) -> float:
                items = [InputItem(ref=f"in-{i}", text=t) for i, t in enumerate(inputs)]
                started = time.perf_counter()
                handle = client.submit(items, "Review this diff", aggregate_instruction=aggregate)
                handle.wait(TIMEOUT_S)
                return time.perf_counter() - started

            try:
                yield run
            finally:
                client.app.backend.result_consumer.stop()

    @contextmanager
    def plain(
        self, sim: procs.Sim, count: int = 2, c: int = 50
    ) -> Iterator[Callable[[list[str], str], float]]:
        """Plain Celery workers; yields ``run(inputs, aggregate) -> wall seconds``."""
        broker, backend = self.redis_url.replace("/0", "/2"), self.redis_url.replace("/0", "/3")
        env = {
            "PLAIN_BROKER_URL": broker,
            "PLAIN_RESULT_URL": backend,
            "PLAIN_BASE_URL": sim.base_url,
            "PYTHONPATH": str(Path(plain_chord.__file__).parent),
        }
        app = plain_chord.make_app(broker, backend)
        with procs.workers(self.folder, env, count, c, plain_chord.QUEUE, "plain_chord") as ps:
            self.pids = [p.pid for p in ps]

            def run(inputs: list[str], aggregate: str) -> float:
                header = [app.signature("plain.call", args=(t, "Review this diff")) for t in inputs]
                started = time.perf_counter()
                result = chord(header, app=app)(app.signature("plain.aggregate", args=(aggregate,)))
                result.get(timeout=TIMEOUT_S, propagate=False)
                return time.perf_counter() - started

            try:
                yield run
            finally:
                app.backend.result_consumer.stop()

    def walls(self, run: Callable[[list[str], str], float], n: int, aggregate: str) -> list[float]:
        """``repeat`` runs of ``n`` fresh inputs after one warm-up run."""
        run(texts(n, "warm-up"), aggregate)
        return [run(texts(n, f"run{i}-{time.time_ns()}"), aggregate) for i in range(self.repeat)]


def median_text(walls: list[float]) -> str:
    """``median (all runs)`` in seconds."""
    runs = ", ".join(f"{w:.2f}" for w in walls)
    return f"median {statistics.median(walls):.2f} s of [{runs}]"


def sim_calls(sim: procs.Sim) -> int:
    """Requests the simulator received since its last reset."""
    return int(sim.stats()["requests"])


def measure(
    run: Callable[[list[str], str], float], sim: procs.Sim, n: int, aggregate: str, repeat: int
) -> tuple[list[float], list[int]]:
    """Walls and extra gateway requests (beyond one per node and the aggregation) of
    ``repeat`` runs after a warm-up run."""
    run(texts(n, "warm-up"), aggregate)
    walls, extra = [], []
    for i in range(repeat):
        sim.reset()
        walls.append(run(texts(n, f"run{i}-{time.time_ns()}"), aggregate))
        extra.append(sim_calls(sim) - (n + 1))
    return walls, extra


def rss_mb(pid: int) -> float:
    """Resident memory of a process (VmRSS), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0
