"""The soak: 10,000 sub-agent calls through the local stack, nothing lost, worker RSS
flat, Redis memory given back once results expire.

Starts `swarm stack up --with-sim` (docker-compose.yml as local processes: redis-server with
a password and AOF, Flower, the three worker services, the simulator at 0-50 ms), with a
catalog copy whose limits are far above the load (admission does not throttle) and a short
SWARM_RESULT_EXPIRES_S. Runs the calls as jobs of ``--job-size`` nodes, ``--parallel`` at a
time, after a warm-up job; checks that every node of every job is in its report; samples the
RSS of every worker process after the warm-up and at the end; waits for the job data to
expire and compares Redis's memory with what it used before the first job. Stops the stack
and writes a Markdown table (``--out``). Too slow for the test suite (a few minutes);
tests/integration/test_hostile_e2e.py runs a 500-call version.

    python ops/bench/soak.py                               # 10,000 calls, jobs of 1,000
    python ops/bench/soak.py --calls 2000 --expires-s 40   # a quicker look
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path
from typing import Any

import redis

from swarm.client import SwarmClient
from swarm.records import InputItem
from swarm.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
SECRET = os.urandom(12).hex()


def roomy_catalog(path: Path) -> Path:
    """The packaged catalog, same prices, limits far above the soak's load."""
    text = resources.files("swarm.data").joinpath("catalog.toml").read_text("utf-8")
    path.write_text(re.sub(r"(?m)^(rpm|rps|tpm|max_inflight) = .*$", r"\1 = 10_000_000", text))
    return path


def stack(run_dir: Path, env: dict[str, str], *args: str) -> str:
    argv = [sys.executable, "-m", "swarm.cli.main", "stack", *args, "--dir", str(run_dir)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise SystemExit(f"swarm stack {args[0]} failed: {done.stderr.strip()}")
    return done.stdout


def rss_mib(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(status.split("VmRSS:")[1].split()[0]) / 1024


def job_keys(client: redis.Redis) -> int:
    """Keys of jobs and their Celery results still in the job store's db."""
    patterns = ("swarm:{job:*", "celery-task-meta-*", "chord-unlock-*")
    return sum(1 for p in patterns for _ in client.scan_iter(p, count=1000))


def run_jobs(
    client: SwarmClient, calls: int, size: int, parallel: int, sample: Any = None
) -> list[dict[str, Any]]:
    """``calls`` nodes as jobs of ``size``, ``parallel`` at a time (``sample()`` after each
    wave); their reports."""

    def one(j: int) -> dict[str, Any]:
        items = [
            InputItem(ref=f"soak-{j}-{i}", text=f"document {j}.{i} " * 20) for i in range(size)
        ]
        return client.submit(items, "Summarise this document").wait(timeout=900).to_dict()

    jobs = list(range(max(calls // size, 1)))
    reports: list[dict[str, Any]] = []
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        for start in range(0, len(jobs), parallel):
            reports.extend(pool.map(one, jobs[start : start + parallel]))
            if sample is not None:
                sample()
    return reports


def lost_nodes(report: dict[str, Any], size: int) -> int:
    """Nodes of a job that its report does not account for (succeeded or failed)."""
    seen = {n["node_id"] for n in report["nodes"]}
    return size - len(seen) + (report["total"] - report["succeeded"] - report["failed"])


def soak(args: argparse.Namespace, run_dir: Path) -> dict[str, Any]:
    env = {
        **os.environ,
        "REDIS_PASSWORD": SECRET,
        "FLOWER_PASSWORD": SECRET,
        "SWARM_API_KEY": "sim",
        "SWARM_CONFIG": str(roomy_catalog(run_dir / "catalog.toml")),
        "SWARM_RESULT_EXPIRES_S": str(args.expires_s),
        "SIM_LATENCY_P50_MS": "20",
        "SIM_LATENCY_P99_MS": "50",
        "SIM_RPM": "100000000",
    }
    (run_dir / "empty.env").write_text("")
    up = ["up", "--with-sim", "--json", "--env-file", str(run_dir / "empty.env")]
    started = {p["name"]: p for p in json.loads(stack(run_dir, env, *up))}
    try:
        return measure(args, env, started)
    finally:
        stack(run_dir, env, "down")


def measure(args: argparse.Namespace, env: dict[str, str], started: dict[str, Any]) -> dict:  # type: ignore[type-arg]
    port = started["redis-1"]["port"]
    settings = Settings(
        broker_url=f"redis://:{SECRET}@127.0.0.1:{port}/0",
        base_url=f"http://127.0.0.1:{started['sim-1']['port']}/v1",
        api_key="sim",  # type: ignore[arg-type]
        config=Path(env["SWARM_CONFIG"]),
        result_expires_s=args.expires_s,
    )
    store_db = redis.Redis(port=port, password=SECRET, db=1, decode_responses=True)
    memory_before = store_db.info("memory")["used_memory"]
    workers = {n: p["pid"] for n, p in started.items() if n.startswith("worker-")}
    client = SwarmClient.from_settings(settings)
    run_jobs(client, args.job_size, args.job_size, 1)  # warm-up: imports, pools, caches
    rss_start = {n: rss_mib(pid) for n, pid in workers.items()}
    busiest = "worker-aggregate-1"  # serves Kimi, the soak's model
    trend: list[float] = []  # its RSS after each wave of jobs
    began = time.monotonic()
    reports = run_jobs(
        client,
        args.calls,
        args.job_size,
        args.parallel,
        lambda: trend.append(rss_mib(workers[busiest])),
    )
    elapsed_s = time.monotonic() - began
    rss_end = {n: rss_mib(pid) for n, pid in workers.items()}
    memory_peak = store_db.info("memory")["used_memory"]
    keys_peak = job_keys(store_db)
    deadline = time.monotonic() + args.expires_s + 60
    while job_keys(store_db) and time.monotonic() < deadline:
        time.sleep(2)
    return {
        "jobs": len(reports),
        "calls": sum(r["total"] for r in reports),
        "succeeded": sum(r["succeeded"] for r in reports),
        "failed": sum(r["failed"] for r in reports),
        "lost": sum(lost_nodes(r, args.job_size) for r in reports),
        "statuses": sorted({r["status"] for r in reports}),
        "elapsed_s": elapsed_s,
        "rss_start": rss_start,
        "rss_end": rss_end,
        "trend": (busiest, trend),
        "memory_before": memory_before,
        "memory_peak": memory_peak,
        "memory_after": store_db.info("memory")["used_memory"],
        "keys_peak": keys_peak,
        "keys_after": job_keys(store_db),
    }


def markdown(args: argparse.Namespace, r: dict[str, Any]) -> str:
    mib = 2**20
    rows = [
        ("calls (nodes)", f"{r['calls']:,} in {r['jobs']} jobs of {args.job_size:,}"),
        ("succeeded / failed / lost", f"{r['succeeded']:,} / {r['failed']} / {r['lost']}"),
        ("job statuses", ", ".join(r["statuses"])),
        ("time for the calls", f"{r['elapsed_s']:.0f} s ({r['calls'] / r['elapsed_s']:.0f}/s)"),
    ]
    rows += [
        (f"RSS {name}", f"{r['rss_start'][name]:.0f} -> {r['rss_end'][name]:.0f} MiB")
        for name in sorted(r["rss_start"])
    ]
    busiest, trend = r["trend"]
    rows.append((f"RSS {busiest} after each wave", " ".join(f"{m:.0f}" for m in trend) + " MiB"))
    rows += [
        ("Redis used_memory before", f"{r['memory_before'] / mib:.1f} MiB"),
        ("Redis used_memory after the jobs", f"{r['memory_peak'] / mib:.1f} MiB"),
        (
            f"Redis used_memory after expiry ({args.expires_s} s)",
            f"{r['memory_after'] / mib:.1f} MiB",
        ),
        (
            "job and result keys: after the jobs / after expiry",
            f"{r['keys_peak']:,} / {r['keys_after']}",
        ),
    ]
    lines = ["| measure | value |", "|---|---|", *(f"| {a} | {b} |" for a, b in rows)]
    command = f"python ops/bench/soak.py --calls {args.calls} --job-size {args.job_size}"
    return "\n".join([f"# Soak ({time.strftime('%Y-%m-%d')})", "", f"`{command}`", "", *lines, ""])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=10_000)
    parser.add_argument("--job-size", type=int, default=1_000)
    parser.add_argument("--parallel", type=int, default=2, help="jobs running at once")
    parser.add_argument("--expires-s", type=int, default=90, help="SWARM_RESULT_EXPIRES_S")
    parser.add_argument("--out", type=Path, default=ROOT / "ops/bench/results/soak.md")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="swarm-soak-") as tmp:
        result = soak(args, Path(tmp))
    text = markdown(args, result)
    print(text)
    args.out.write_text(text)
    return 0 if result["lost"] == 0 and result["keys_after"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
