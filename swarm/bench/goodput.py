"""Goodput: a long load from worker processes against a gateway enforcing an RPM cap.

Reports successful calls per minute as a share of the cap, and the share of 429 answers.
The job is sized to keep every worker busy for the whole duration, then cancelled.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from swarm.bench import procs
from swarm.bench.swarm_load import close_client, inputs
from swarm.bench.sweep import MODEL, QUEUE, bench_catalog, swarm_env, swarm_settings
from swarm.client import SwarmClient

SEED_LATENCY = ["--latency-p50-ms", "1180", "--latency-p99-ms", "2380", "--seed", "1"]


@dataclass(frozen=True)
class Goodput:
    """What the gateway saw during the run."""

    duration_s: float
    rpm_cap: int
    completed: int
    """200 answers (with usage) the gateway sent."""
    requests: int
    """Chat requests it received."""
    rate_limited: int
    """429 answers."""
    max_60s: int
    """Most requests it admitted in any sliding 60 s window."""

    @property
    def per_minute(self) -> float:
        """Successful calls per minute."""
        return self.completed / (self.duration_s / 60.0)

    @property
    def share_of_cap(self) -> float:
        """Successful calls per minute / the cap."""
        return self.per_minute / self.rpm_cap

    @property
    def share_429(self) -> float:
        """429 answers / requests."""
        return self.rate_limited / self.requests if self.requests else 0.0


def run_goodput(
    folder: Path, duration_s: float, rpm: int, workers: int, concurrency: int
) -> Goodput:
    """``workers`` processes of ``concurrency`` threads for ``duration_s`` against ``rpm``."""
    catalog = bench_catalog(folder, rpm=rpm, rps=None, max_inflight=10_000)
    sim_args = ["--rpm", str(rpm), *SEED_LATENCY]
    with procs.redis_server(folder) as redis_url, procs.sim(folder, sim_args) as sim:
        env = swarm_env(redis_url, sim.base_url, catalog, concurrency)
        with procs.workers(folder, env, workers, concurrency, QUEUE):
            client = SwarmClient.from_settings(swarm_settings(env))
            count = int(rpm * duration_s / 60 * 1.3) + 100
            sim.reset()
            started = time.monotonic()
            handle = client.submit(inputs(count), "Review this diff")
            time.sleep(max(0.0, duration_s - (time.monotonic() - started)))
            stats = sim.stats()
            handle.cancel()
            close_client(client)
    model = stats["models"].get(MODEL, {})
    window = stats["windows"].get(MODEL, {})
    return Goodput(
        duration_s=duration_s,
        rpm_cap=rpm,
        completed=int(model.get("completed", 0)),
        requests=int(model.get("requests", 0)),
        rate_limited=int(model.get("rate_limited", 0)),
        max_60s=int(window.get("max_requests_60s", 0)),
    )
