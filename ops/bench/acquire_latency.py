"""Acquire latency of the Redis admission script on a private loopback redis-server.

    python ops/bench/acquire_latency.py            # 5000 acquire + finish pairs
    python ops/bench/acquire_latency.py --calls 20000

Prints p50/p99/max of one acquire round trip (the Lua script: lease purge, pause, in-flight,
fair share and the rpm/rps/tpm GCRA limits) as seen by a Python client, and of finish.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import redis

from swarm.bench.procs import redis_server
from swarm.calls.admission import AdmissionPolicy, Outcome
from swarm.calls.admission.redis import RedisAdmission
from swarm.catalog import load_catalog


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5000)
    args = parser.parse_args()
    spec = (
        load_catalog()
        .model("kimi-k2.5")
        .model_copy(update={"rpm": 10**9, "rps": 10**7, "tpm": 10**12, "max_inflight": 10**6})
    )
    with tempfile.TemporaryDirectory() as folder, redis_server(Path(folder)) as url:
        ctl = RedisAdmission(redis.Redis.from_url(url), "http://bench/v1", AdmissionPolicy())
        acquire_us, finish_us = [], []
        for i in range(args.calls):
            t0 = time.perf_counter()
            decision = ctl.acquire(spec, f"job-{i % 3}", 500)
            t1 = time.perf_counter()
            if decision.permit is not None:
                ctl.finish(spec, decision.permit, Outcome(used_tokens=300))
            acquire_us.append((t1 - t0) * 1e6)
            finish_us.append((time.perf_counter() - t1) * 1e6)
        admitted = ctl.counters(spec).admitted
    for name, values in (("acquire", acquire_us), ("finish", finish_us)):
        cuts = statistics.quantiles(values, n=100)
        print(
            f"{name}: p50 {statistics.median(values):.0f} us, p99 {cuts[98]:.0f} us, "
            f"max {max(values):.0f} us over {len(values)} calls"
        )
    print(f"admitted {admitted} of {args.calls}")


if __name__ == "__main__":
    main()
