"""The scale bench: one job of N inputs, per N, on a fresh Redis, `swarm sim` and 2 workers.

Per row: a fresh redis-server (its memory figures are this job's alone), `swarm sim
--latency-ms 50`, two `celery -A workers worker -c 32` processes and a catalog whose limits
are far above the load. The job is `swarm run - --no-wait` with one stdin line per input;
the bench then waits for the report (EXISTS of its key) and prints:

- submit: `swarm run - --no-wait` wall time (process start to job id printed), and the
  producer's peak RSS (the child's ru_maxrss);
- nodes/s: inputs / (submit start to report written);
- Redis: used_memory_peak, and bytes per node (used_memory once the report is written
  minus before the submit, over N), split by key kind (MEMORY USAGE per key);
- report: bytes of `swarm status JOB --json` and of `swarm status JOB` (the summary), and
  how long each took;
- workers: their RSS summed, peak while the job ran and at its end;
- with ``--rss-series``: each worker's RSS (and their sum) before the job and when 10, 25,
  50, 75 and 100% of its nodes had ended (envelopes written, HLEN), and once the report
  was written: memory that grows with the nodes done (a slope) against a warm-up that
  levels off (a plateau);
- with ``--jobs K``: K jobs of N inputs one after the other on the same workers (one row
  each): what a second job adds on workers already warm.

The workers run with the deployment's glibc tunables (``GLIBC_TUNABLES`` carrying
``glibc.malloc.tcache_count=0``, over any the shell exported: swarm.procs.tunables), as
docker-compose.yml and `swarm stack` start them; ``--glibc-defaults`` runs them without
(glibc's per-thread caches on), for comparison.

    python ops/bench/scale.py                     # 1,000 and 10,000
    python ops/bench/scale.py --inputs 1000       # one row
    python ops/bench/scale.py --with-100k         # adds the 100,000 row (long on 2 cores)
    python ops/bench/scale.py --glibc-defaults    # workers with glibc's tcache on
    python ops/bench/scale.py --inputs 100000 --rss-series          # RSS against nodes done
    python ops/bench/scale.py --inputs 50000 --jobs 2 --rss-series  # two jobs, same workers
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import redis

from swarm.bench import procs
from swarm.bench.sweep import swarm_env
from swarm.procs.tunables import with_tcache_off
from swarm.store.redis import JOB_INDEX

ROOT = Path(__file__).resolve().parents[2]
WORKERS = 2
CONCURRENCY = 32
SIM_ARGS = ["--latency-ms", "50"]
TIMEOUT_S = 3600.0
INSTRUCTION = "Review this diff"
QUEUE = "llm.kimi-k2.5"
"""The queue of the catalog's default and aggregate model."""


def roomy_catalog(path: Path) -> Path:
    """The packaged catalog, limits far above the load (admission never throttles)."""
    text = resources.files("swarm.data").joinpath("catalog.toml").read_text("utf-8")
    path.write_text(re.sub(r"(?m)^(rpm|rps|tpm|max_inflight) = .*$", r"\1 = 10_000_000", text))
    return path


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of ``pid`` (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def redis_cpu_s(client: redis.Redis) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def rss_mb(pid: int) -> float:
    """VmRSS of ``pid`` in MB (0 once it is gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    return int(status.split("VmRSS:")[1].split()[0]) / 1024


SERIES_AT = (0.10, 0.25, 0.50, 0.75, 1.0)
"""Fractions of the job's nodes ended at which --rss-series reports the workers' RSS."""


@dataclass(frozen=True)
class RssSample:
    """The workers' RSS (MB, each) when ``done`` of the job's nodes had ended."""

    done: int
    each_mb: tuple[float, ...]


@dataclass
class Sampler:
    """Samples the workers' RSS, the job's ended nodes and Redis's used_memory every second.

    The job is the newest in the store's index that is not in ``earlier`` (the submit
    streams its inputs and nodes run before it prints the job id)."""

    pids: list[int]
    client: redis.Redis
    earlier: frozenset[str] = frozenset()
    peak_rss_mb: float = 0.0
    peak_redis: int = 0
    series: list[RssSample] = field(default_factory=list)
    _job_id: str | None = None
    _stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        while not self._stop.wait(1.0):
            each = tuple(rss_mb(p) for p in self.pids)
            self.peak_rss_mb = max(self.peak_rss_mb, sum(each))
            used = int(self.client.info("memory")["used_memory"])
            self.peak_redis = max(self.peak_redis, used)
            self.series.append(RssSample(self._ended(), each))

    def _ended(self) -> int:
        """Envelopes written so far (one per ended node), 0 before the job is indexed."""
        if self._job_id is None:
            newest = [str(j) for j in self.client.zrevrange(JOB_INDEX, 0, 4)]
            self._job_id = next((j for j in newest if j not in self.earlier), None)
        if self._job_id is None:
            return 0
        return int(self.client.hlen(f"swarm:{{job:{self._job_id}}}:env"))

    def stop(self) -> None:
        self._stop.set()


@dataclass(frozen=True)
class Row:
    inputs: int
    submit_s: float
    producer_mb: float
    wall_s: float
    redis_peak_mb: float
    bytes_per_node: float
    by_kind: dict[str, float]
    report_json_bytes: int
    report_json_s: float
    summary_bytes: int
    summary_s: float
    workers_peak_mb: float
    workers_end_mb: float
    workers_each_mb: tuple[float, ...]
    workers_cpu_ms: float
    """Both workers' CPU per node (robust to the machine's other load, unlike nodes/s)."""
    redis_cpu_ms: float
    workers_before_mb: tuple[float, ...] = ()
    """Each worker's RSS just before the submit."""
    series: tuple[RssSample, ...] = ()
    job: int = 1
    """1 for the first job on fresh workers, 2 for the next on the same workers, ..."""

    @property
    def nodes_per_s(self) -> float:
        return self.inputs / self.wall_s


def swarm_cli(env: dict[str, str], *args: str, stdin: bytes | None = None) -> tuple[bytes, float]:
    """Run `swarm ARGS`; its stdout and wall time."""
    argv = [sys.executable, "-m", "swarm.cli.main", *args]
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, input=stdin, capture_output=True, timeout=TIMEOUT_S)
    return done.stdout, time.perf_counter() - started


def submit(env: dict[str, str], count: int, folder: Path) -> tuple[str, float, float]:
    """`swarm run - --no-wait` of ``count`` lines: job id, wall time, peak RSS (MB, GNU
    time's maximum resident set size)."""
    rss_file = folder / "producer-rss"
    argv = ["/usr/bin/time", "-o", str(rss_file), "-f", "%M", sys.executable, "-m",
            "swarm.cli.main", "run", "-", "--no-wait", "--instruction", INSTRUCTION]  # fmt: skip
    lines = "".join(f"diff --git a/f{i}.py +x = {i}\n" for i in range(count)).encode()
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, input=lines, capture_output=True, timeout=TIMEOUT_S)
    wall = time.perf_counter() - started
    if done.returncode:
        raise SystemExit(f"swarm run failed: {done.stderr.decode()[-2000:]}")
    peak = int(rss_file.read_text().split()[-1]) / 1024
    return done.stdout.decode().strip().splitlines()[-1], wall, peak


def key_kind(key: str) -> str:
    """A job key's kind: ``env``, ``inputs``, ... or a Celery key's prefix."""
    if key.startswith("swarm:{job:"):
        return "swarm:" + key.split("}:", 1)[1].split(":", 1)[0]
    if key.startswith("celery-task-meta-"):
        return "celery-task-meta"
    return re.split(r"[-:]", key, maxsplit=1)[0]


def db_url(url: str, db: int) -> str:
    """``url`` (``redis://host:port/0``) on db ``db`` (the URL's db wins over a db= argument)."""
    return f"{url.rsplit('/', 1)[0]}/{db}"


def bytes_by_kind(url: str) -> Counter[str]:
    """MEMORY USAGE summed by key kind over the broker's db 0 and the store's db 1."""
    kinds: Counter[str] = Counter()
    for db in (0, 1):
        client = redis.Redis.from_url(db_url(url, db), decode_responses=True)
        for key in client.scan_iter(count=1000):
            kinds[f"db{db} {key_kind(str(key))}"] += int(client.memory_usage(key) or 0)
    return kinds


def worker_env(env: dict[str, str], glibc_defaults: bool) -> dict[str, str]:
    """The workers' environment: ``env``, with the deployment's glibc tunables unless
    ``glibc_defaults``."""
    return dict(env) if glibc_defaults else with_tcache_off(env)


def run_rows(folder: Path, count: int, jobs: int = 1, glibc_defaults: bool = False) -> list[Row]:
    """``jobs`` jobs of ``count`` inputs, one after the other, on one set of fresh
    processes (Redis, the simulator, the workers)."""
    with procs.redis_server(folder) as url, procs.sim(folder, SIM_ARGS) as sim:
        env = {**os.environ, **swarm_env(url, sim.base_url, roomy_catalog(folder / "c.toml"),
                                         CONCURRENCY)}  # fmt: skip
        workers_env = worker_env(env, glibc_defaults)
        with procs.workers(folder, workers_env, WORKERS, CONCURRENCY, QUEUE) as ws:
            rows: list[Row] = []
            for job in range(1, jobs + 1):
                rows.append(run_job(folder, url, env, [w.pid for w in ws], count, job))
    return rows


def run_job(folder: Path, url: str, env: dict[str, str], pids: list[int], count: int,
            job: int) -> Row:  # fmt: skip
    """One job of ``count`` inputs on running workers ``pids``; its row."""
    client = redis.Redis.from_url(db_url(url, 1), decode_responses=True)  # the job store
    earlier = frozenset(str(j) for j in client.zrange(JOB_INDEX, 0, -1))
    client.memory_purge()
    before = int(client.info("memory")["used_memory"])
    before_kinds = bytes_by_kind(url)
    before_rss = tuple(rss_mb(p) for p in pids)
    cpu_before = sum(cpu_s(p) for p in pids)
    redis_before = redis_cpu_s(client)
    sampler = Sampler(pids, client, earlier)
    thread = threading.Thread(target=sampler.run, daemon=True)
    thread.start()
    started = time.perf_counter()
    job_id, submit_s, producer_mb = submit(env, count, folder)
    report_key = f"swarm:{{job:{job_id}}}:report"
    deadline = time.monotonic() + TIMEOUT_S
    while not client.exists(report_key) and time.monotonic() < deadline:
        time.sleep(0.2)
    wall = time.perf_counter() - started
    sampler.stop()
    thread.join()
    each_rss = tuple(rss_mb(p) for p in pids)
    end_rss = sum(each_rss)
    cpu = sum(cpu_s(p) for p in pids) - cpu_before
    redis_cpu = redis_cpu_s(client) - redis_before
    after = int(client.info("memory")["used_memory"])
    peak = int(client.info("memory")["used_memory_peak"])
    kinds = bytes_by_kind(url)
    kinds.subtract(before_kinds)
    full, full_s = swarm_cli(env, "status", job_id, "--json")
    summary, summary_s = swarm_cli(env, "status", job_id)
    return Row(
        inputs=count,
        submit_s=submit_s,
        producer_mb=producer_mb,
        wall_s=wall,
        redis_peak_mb=peak / 1e6,
        bytes_per_node=(after - before) / count,
        by_kind={k: v / count for k, v in kinds.most_common() if v > 0},
        report_json_bytes=len(full),
        report_json_s=full_s,
        summary_bytes=len(summary),
        summary_s=summary_s,
        workers_peak_mb=max(sampler.peak_rss_mb, end_rss),
        workers_end_mb=end_rss,
        workers_each_mb=each_rss,
        workers_cpu_ms=cpu * 1000 / count,
        redis_cpu_ms=redis_cpu * 1000 / count,
        workers_before_mb=before_rss,
        series=(*sampler.series, RssSample(count, each_rss)),
        job=job,
    )


def series_points(row: Row) -> list[tuple[str, RssSample]]:
    """The row's RSS before the job, at each of SERIES_AT's fractions of its nodes ended
    (the first sample at or past it), and once its report was written."""
    points = [("before", RssSample(0, row.workers_before_mb))]
    for fraction in SERIES_AT:
        reached = next((s for s in row.series if s.done >= fraction * row.inputs), None)
        if reached is not None:
            points.append((f"{fraction:.0%}", reached))
    points.append(("report", row.series[-1]))
    return points


def series_table(rows: list[Row]) -> str:
    """Each worker's RSS (MB) against the nodes ended, per row."""
    lines = ["| inputs | job | point | nodes ended | workers' RSS (each) MB |", "|" + "---|" * 5]
    for r in rows:
        for label, s in series_points(r):
            each = " + ".join(f"{mb:.1f}" for mb in s.each_mb)
            lines.append(f"| {r.inputs:,} | {r.job} | {label} | {s.done:,} "
                         f"| {sum(s.each_mb):.1f} ({each}) |")  # fmt: skip
    return "\n".join(lines)


def table(rows: list[Row]) -> str:
    head = ("| inputs | job | submit | producer RSS | wall | nodes/s | Redis peak | bytes/node "
            "| `status --json` | `status` | workers' RSS peak / end "
            "| CPU ms/node workers / Redis |")  # fmt: skip
    lines = [head, "|" + "---|" * 12]
    for r in rows:
        lines.append(
            f"| {r.inputs:,} | {r.job} | {r.submit_s:.1f} s | {r.producer_mb:.0f} MB "
            f"| {r.wall_s:.1f} s "
            f"| {r.nodes_per_s:.0f} | {r.redis_peak_mb:.1f} MB | {r.bytes_per_node:,.0f} "
            f"| {r.report_json_bytes / 1e6:.2f} MB in {r.report_json_s:.1f} s "
            f"| {r.summary_bytes:,} B in {r.summary_s:.1f} s "
            f"| {r.workers_peak_mb:.0f} / {r.workers_end_mb:.0f} MB "
            f"({' + '.join(f'{mb:.0f}' for mb in r.workers_each_mb)}) "
            f"| {r.workers_cpu_ms:.2f} / {r.redis_cpu_ms:.2f} |"
        )
    lines += ["", "Bytes per node by key kind (MEMORY USAGE once the report is written):", ""]
    for r in rows:
        parts = ", ".join(f"{k} {v:,.0f}" for k, v in r.by_kind.items() if v >= 1)
        lines.append(f"- {r.inputs:,} (job {r.job}): {parts}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=int, action="append", help="rows (default 1000, 10000)")
    parser.add_argument("--with-100k", action="store_true", help="add the 100,000 row")
    parser.add_argument(
        "--glibc-defaults",
        action="store_true",
        help="workers without the deployment's GLIBC_TUNABLES (glibc's per-thread caches on)",
    )
    parser.add_argument("--jobs", type=int, default=1, help="jobs per row on the same workers")
    parser.add_argument(
        "--rss-series", action="store_true", help="each worker's RSS against the nodes ended"
    )
    args = parser.parse_args()
    counts = args.inputs or [1000, 10000]
    if args.with_100k:
        counts.append(100_000)
    rows: list[Row] = []
    for count in counts:
        with tempfile.TemporaryDirectory(prefix="swarm-scale-") as tmp:
            done = run_rows(Path(tmp), count, args.jobs, args.glibc_defaults)
        rows += done
        print(table(done), flush=True)
        if args.rss_series:
            print(series_table(done), flush=True)
    print()
    print(table(rows))
    if args.rss_series:
        print()
        print(series_table(rows))


if __name__ == "__main__":
    main()
