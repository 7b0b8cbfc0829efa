"""Concurrency sweep: the seed 000 table for the baseline client and for swarm, side by side.

The simulator is set up like the seed's gateway: 80 requests/s per tenant (429 above), the
latency rising past 40 requests/s, p50 1.18 s and p99 2.38 s. Every point runs the same
job (``--tasks``, 800 by default), so the rows differ only in concurrency. Concurrency C is
the baseline's semaphore (requests in flight at most) and, for swarm, its task threads (4
processes x C/4): the operator's concurrency setting. A swarm task thread carries several
nodes (swarm.jobs.batch) on at least 64 node threads per process, so swarm's calls in flight
are bounded by the admission controller (the catalog's limits), not by C. The third
client, "swarm, in flight <= C", also caps calls in flight cluster-wide at C through the
catalog's max_inflight: the same concurrency as the baseline, call for call.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from swarm.bench import procs
from swarm.bench.baseline import run_baseline
from swarm.bench.swarm_load import run_job
from swarm.settings import Settings, load_settings

MODEL = "kimi-k2.5"
QUEUE = f"llm.{MODEL}"
SEED_GATEWAY = [
    "--rps", "80", "--knee-rps", "40",
    "--latency-p50-ms", "1180", "--latency-p99-ms", "2380", "--seed", "0",
]  # fmt: skip
API_KEY = "bench-not-a-key"
WINDOW_CLEAR_S = 1.5
"""Pause between runs so the simulator's 1 s windows are empty again."""


@dataclass(frozen=True)
class Row:
    """One line of the seed table."""

    client: str
    concurrency: int
    tasks: int
    p50_ms: float
    p99_ms: float
    success_pct: float
    throughput: float
    """Successful tasks per second."""
    rate_limited: int
    """429 answers the gateway sent during the run."""


def percentiles(latencies_ms: list[float]) -> tuple[float, float]:
    """(p50, p99); zeros when empty."""
    if not latencies_ms:
        return 0.0, 0.0
    if len(latencies_ms) < 2:
        return latencies_ms[0], latencies_ms[0]
    cuts = statistics.quantiles(latencies_ms, n=100, method="inclusive")
    return statistics.median(latencies_ms), cuts[98]


def make_row(
    client: str, concurrency: int, tasks: int, ok_latencies: list[float], elapsed_s: float, rl: int
) -> Row:
    """A table row from the successful tasks' latencies."""
    p50, p99 = percentiles(ok_latencies)
    ok = len(ok_latencies)
    return Row(client, concurrency, tasks, p50, p99, 100.0 * ok / tasks, ok / elapsed_s, rl)


def bench_catalog(
    folder: Path, *, rpm: int, rps: int | None, max_inflight: int, window: str = "bucket"
) -> Path:
    """A one-model catalog with the gateway's limits (the admission ceiling), counted as
    ``window`` says (the catalog's ``limit_window``)."""
    rps_line = f"rps = {rps}\n" if rps else ""
    text = (
        f'[models."{MODEL}"]\ngateway_name = "{MODEL}"\nqueue = "{QUEUE}"\n'
        "input_per_mtok_usd = 1.5\noutput_per_mtok_usd = 0.6\ncached_input_per_mtok_usd = 0.15\n"
        f"rpm = {rpm}\n{rps_line}tpm = 1000000000\nmax_inflight = {max_inflight}\n"
        f'context_window = 262144\nmax_tokens = 2048\nlimit_window = "{window}"\n\n'
        f'[routing]\ndefault = ["{MODEL}"]\naggregate = ["{MODEL}"]\n'
    )
    path = folder / "catalog.toml"
    path.write_text(text, "utf-8")
    return path


def swarm_env(redis_url: str, base_url: str, catalog: Path, concurrency: int) -> dict[str, str]:
    """Environment of the worker processes."""
    return {
        "SWARM_BROKER_URL": redis_url,
        "SWARM_BASE_URL": base_url,
        "SWARM_API_KEY": API_KEY,
        "SWARM_CONFIG": str(catalog),
        "SWARM_WORKER_CONCURRENCY": str(concurrency),
    }


def _fresh(sim: procs.Sim) -> None:
    time.sleep(WINDOW_CLEAR_S)
    sim.reset()


def run_sweep(
    folder: Path, levels: list[int], tasks_for: dict[int, int], workers: int
) -> list[Row]:
    """Both clients at every concurrency level, against one seed-like simulator."""
    rows: list[Row] = []
    with procs.redis_server(folder) as redis_url, procs.sim(folder, SEED_GATEWAY) as sim:
        for level in levels:
            tasks = tasks_for[level]
            _fresh(sim)
            base = run_baseline(sim.base_url, MODEL, tasks, level)
            ok = [r.latency_ms for r in base.results if r.ok]
            rl = int(sim.stats()["rate_limited"])
            rows.append(make_row("baseline", level, tasks, ok, base.elapsed_s, rl))
            for client, max_inflight in (("swarm", 10_000), ("swarm, in flight <= C", level)):
                catalog = bench_catalog(folder, rpm=80 * 60, rps=80, max_inflight=max_inflight)
                env = swarm_env(redis_url, sim.base_url, catalog, max(1, level // workers))
                rows.append(_swarm_row(client, folder, env, sim, level, tasks, workers))
    return rows


def _swarm_row(
    client: str, folder: Path, env: dict[str, str], sim: procs.Sim, level: int, tasks: int, n: int
) -> Row:
    """One job of ``tasks`` inputs on ``n`` worker processes with ``env``."""
    with procs.workers(folder, env, n, int(env["SWARM_WORKER_CONCURRENCY"]), QUEUE):
        _fresh(sim)
        run = run_job(swarm_settings(env), tasks)
        rl = int(sim.stats()["rate_limited"])
    return make_row(client, level, tasks, run.latencies_ms, run.elapsed_s, rl)


def swarm_settings(env: dict[str, str]) -> Settings:
    """The producer's settings for the workers' environment ``env``."""
    return load_settings(
        broker_url=env["SWARM_BROKER_URL"],
        base_url=env["SWARM_BASE_URL"],
        api_key=env["SWARM_API_KEY"],
        config=Path(env["SWARM_CONFIG"]),
    )
