"""Swarm's speed on a fast hosted-like gateway against a plain Celery chord, side by side in
one run, with the CPU each process spends per call and Redis's commands per call.

One private redis-server and one `swarm sim` per scenario serve every client; each client
gets two fresh worker processes (threads pool, ``-c 50``): the plain chord of
swarm.bench.plain_chord (no swarm code), then swarm once per catalog (SWARM_CONFIG of the
workers and of the producer). Scenarios:

    a  2,000 inputs at 0 ms: calls/s from submit (the producer API, as `swarm run` does it
       without a terminal) to the report, median of ``--repeat`` runs after a 200-input
       warm-up; swarm / plain
    b  100 inputs at 1 s + a 1 s aggregation, best of ``--repeat`` after a warm-up:
       makespan / the 2.0 s critical path

Every measured run also reads utime + stime of the worker processes, of redis-server and
of the simulator (/proc/PID/stat) and Redis's INFO commandstats before and after: CPU ms
per call (the inputs and the aggregation) and commands per call, summed over the runs.
Catalogs: ``packaged`` (swarm/data/catalog.toml), ``no-default-backend`` (a copy of it
without its ``[backends.default]`` table), ``far-limits`` and
``far-limits-no-default-backend`` (the same two with kimi-k2.5's limits far above the load:
the packaged 80 requests/s cap the plain chord does not have), ``far-limits-local``
(far-limits with its backend declared local: the local call path), or a path; ``@KEY=VALUE,...``
after it sets the environment of that arm's workers (``far-limits@SWARM_ABANDONED_GRACE_S=0``:
overtime off). Prints the tables and writes them to ops/bench/results/hosted_speed.md.

    python ops/bench/hosted_speed.py                # far-limits, far-limits-no-default-backend
    python ops/bench/hosted_speed.py --catalog packaged --catalog no-default-backend
    python ops/bench/hosted_speed.py --only a --inputs 500 --repeat 1 --catalog my.toml
    python ops/bench/hosted_speed.py --catalog far-limits-no-default-backend \
        --catalog far-limits-no-default-backend@SWARM_ABANDONED_GRACE_S=0
    python ops/bench/hosted_speed.py --only a --profile /tmp/prof   # + py-spy of the workers

With ``--profile DIR`` the first measured run of scenario a of every client is sampled by
py-spy (ops/bench/worker_profile.py; ``pip install py-spy``): raw stacks in DIR, and each
swarm arm's top functions in the tables.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import redis
import worker_profile

from swarm.bench import procs
from swarm.bench.overhead import AGGREGATE_1S, Bench, texts

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "ops" / "bench" / "results" / "hosted_speed.md"
TICKS = os.sysconf("SC_CLK_TCK")
Run = Callable[[list[str], str], float]
Client = Callable[[procs.Sim], AbstractContextManager[Run]]
SCRIPT_CALLS = ("evalsha", "eval", "fcall")
"""Commands that run a Lua script (the commands it runs inside are counted by name too)."""


def cpu_s(pid: int) -> float:
    """utime + stime of a process (all its threads), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


@dataclass
class Sample:
    """What the measured runs of one client cost, summed."""

    walls: list[float] = field(default_factory=list)
    calls: int = 0
    """Gateway calls the runs asked for (inputs + one aggregation each)."""
    cpu: dict[str, float] = field(default_factory=dict)
    """CPU seconds by process group: workers, redis, sim, producer (this process: the
    client's submit and wait, and this meter)."""
    commands: dict[str, float] = field(default_factory=dict)
    """Redis commands by name."""

    def per_call_ms(self, group: str) -> float:
        return 1000 * self.cpu.get(group, 0.0) / max(self.calls, 1)

    def commands_per_call(self) -> float:
        return sum(self.commands.values()) / max(self.calls, 1)


@dataclass
class Meter:
    """Reads the processes' CPU and Redis's command counts around each measured run."""

    bench: Bench
    redis_client: redis.Redis
    sim: procs.Sim

    def pids(self) -> dict[str, list[int]]:
        server = int(self.redis_client.info("server")["process_id"])
        return {"workers": list(self.bench.pids), "redis": [server], "sim": [self.sim.proc.pid],
                "producer": [os.getpid()]}  # fmt: skip

    def commandstats(self) -> dict[str, float]:
        stats = self.redis_client.info("commandstats")
        return {name.removeprefix("cmdstat_"): float(v["calls"]) for name, v in stats.items()}

    def measure(self, sample: Sample, run: Run, inputs: list[str], aggregate: str) -> None:
        """One run of ``inputs``, its wall, CPU and commands added to ``sample``."""
        pids = self.pids()
        cpu0 = {g: sum(map(cpu_s, ps)) for g, ps in pids.items()}
        cmd0 = self.commandstats()
        sample.walls.append(run(inputs, aggregate))
        cmd1 = self.commandstats()
        for group, ps in pids.items():
            sample.cpu[group] = sample.cpu.get(group, 0.0) + sum(map(cpu_s, ps)) - cpu0[group]
        for name, calls in cmd1.items():
            if name not in ("info", "ping"):  # this meter's own, and health checks
                sample.commands[name] = sample.commands.get(name, 0.0) + calls - cmd0.get(name, 0)
        sample.calls += len(inputs) + 1


@dataclass(frozen=True)
class Result:
    """One client in one scenario."""

    scenario: str
    client: str
    figure: float
    unit: str
    sample: Sample
    profile: list[tuple[str, float]] = field(default_factory=list)
    """When profiled: the workers' top packages (share of CPU samples running their own
    code), then top functions (share of CPU samples on the stack)."""


FAR_LIMITS = {"rpm": "60_000_000", "tpm": "1_000_000_000", "max_inflight": "100_000"}
"""Limits of kimi-k2.5 in the far-limits catalogs (and no rps): far above any load here."""


def catalog_path(name: str, bench: Bench) -> Path:
    """The catalog named ``name`` (see the module's text) as a file."""
    variants = (
        "packaged", "no-default-backend", "far-limits", "far-limits-no-default-backend",
        "far-limits-local",
    )  # fmt: skip
    if name not in variants:
        return Path(name).resolve()
    text = resources.files("swarm.data").joinpath("catalog.toml").read_text("utf-8")
    if name.endswith("no-default-backend"):
        text = re.sub(r"^\[backends\.default\]\n(?:(?!\[)[^\n]*\n)*", "", text, flags=re.M)
    if name.startswith("far-limits"):
        text = far_limits(text)
    if name.endswith("-local"):  # the same gateway declared a local server: the local path
        text = text.replace('kind = "hosted"', 'kind = "local"')
    path = bench.folder / f"catalog-{name}.toml"
    path.write_text(text, "utf-8")
    return path


def far_limits(text: str) -> str:
    """The catalog with kimi-k2.5's limits far above the load (FAR_LIMITS, no rps)."""
    head, _, rest = text.partition('[models."kimi-k2.5"]\n')
    table, sep, tail = rest.partition("\n[")
    lines = [line for line in table.splitlines() if not line.startswith("rps")]
    for key, value in FAR_LIMITS.items():
        lines = [f"{key} = {value}" if line.startswith(f"{key} ") else line for line in lines]
    return head + '[models."kimi-k2.5"]\n' + "\n".join(lines) + "\n" + sep + tail


def clients(bench: Bench, catalogs: list[str]) -> Iterator[tuple[str, Client]]:
    yield "plain celery", bench.plain
    for arm in catalogs:
        name, env = parse_arm(arm)
        yield f"swarm ({arm})", swarm_client(bench, catalog_path(name, bench), env)


def parse_arm(arm: str) -> tuple[str, dict[str, str]]:
    """``NAME[@KEY=VALUE,KEY=VALUE]``: a catalog and the swarm workers' extra environment."""
    name, _, extra = arm.partition("@")
    env = dict(pair.split("=", 1) for pair in extra.split(",") if pair)
    return name, env


def swarm_client(bench: Bench, catalog: Path, env: dict[str, str]) -> Client:
    def client(sim: procs.Sim) -> AbstractContextManager[Run]:
        return bench.swarm(sim, env, catalog=catalog)

    return client


def throughput(
    bench: Bench, catalogs: list[str], n: int, profile: Path | None = None
) -> list[Result]:
    """(a) ``n`` inputs at 0 ms: calls/s (inputs / median wall). With ``profile``, the
    workers' first measured run is sampled by py-spy (ops/bench/worker_profile.py)."""
    results = []
    with procs.sim(bench.folder, []) as sim:
        meter = Meter(bench, redis.Redis.from_url(bench.redis_url), sim)
        for name, client in clients(bench, catalogs):
            sample, top = Sample(), []
            with client(sim) as run:
                run(texts(200, "warm-up"), "Merge.")
                for i in range(bench.repeat):
                    inputs = texts(n, f"a{i}-{time.time_ns()}")
                    if i > 0 or profile is None:
                        meter.measure(sample, run, inputs, "Merge.")
                        continue
                    label = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
                    with worker_profile.recording(bench.pids, profile, label) as files:
                        meter.measure(sample, run, inputs, "Merge.")
                    top = worker_profile.by_package(files)
                    top += worker_profile.top_functions(files, top=30)
            rate = n / statistics.median(sample.walls)
            results.append(Result(f"a {n:,} x 0 ms", name, rate, "calls/s", sample, top))
            print(f"  {name}: {rate:.1f} calls/s {sample.walls}", file=sys.stderr)
    return results


def critical_path(bench: Bench, catalogs: list[str]) -> list[Result]:
    """(b) 100 inputs at 1 s + a 1 s aggregation: best makespan / 2.0 s."""
    results = []
    with procs.sim(bench.folder, ["--latency-ms", "1000"]) as sim:
        meter = Meter(bench, redis.Redis.from_url(bench.redis_url), sim)
        for name, client in clients(bench, catalogs):
            sample = Sample()
            with client(sim) as run:
                run(texts(100, "warm-up"), AGGREGATE_1S)
                for i in range(bench.repeat):
                    meter.measure(sample, run, texts(100, f"b{i}-{time.time_ns()}"), AGGREGATE_1S)
            ratio = min(sample.walls) / 2.0
            results.append(Result("b 100 x 1 s + 1 s agg", name, ratio, "x 2.0 s", sample))
            print(f"  {name}: {ratio:.2f}x {sample.walls}", file=sys.stderr)
    return results


def verdicts(results: list[Result]) -> list[str]:
    """Swarm against the plain chord (a: >= 2x) and against the critical path (b: <= 1.15x)."""
    lines = []
    for r in results:
        if r.client == "plain celery":
            continue
        if r.scenario.startswith("a "):
            plain = next(p for p in results if p.scenario == r.scenario and p is not r)
            ratio = r.figure / plain.figure
            ok = "meets" if ratio >= 2.0 else "misses"
            lines.append(f"{r.scenario}: {r.client} / plain = {ratio:.2f}x ({ok} >= 2x)")
        else:
            ok = "meets" if r.figure <= 1.15 else "misses"
            lines.append(
                f"{r.scenario}: {r.client} {r.figure:.2f}x the critical path ({ok} <= 1.15x)"
            )
    return lines


def markdown(results: list[Result], header: str) -> str:
    rows = [
        "| scenario | client | figure | unit | runs (s) | worker CPU ms/call "
        "| redis CPU ms/call | sim CPU ms/call | producer CPU ms/call | redis cmds/call |",
        "|---|---|---:|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        s = r.sample
        runs = ", ".join(f"{w:.2f}" for w in s.walls)
        rows.append(
            f"| {r.scenario} | {r.client} | {r.figure:.2f} | {r.unit} | {runs} "
            f"| {s.per_call_ms('workers'):.2f} | {s.per_call_ms('redis'):.2f} "
            f"| {s.per_call_ms('sim'):.2f} | {s.per_call_ms('producer'):.2f} "
            f"| {s.commands_per_call():.1f} |"
        )
    tables = [header, "", *rows, "", *verdicts(results), "", commands_table(results)]
    return "\n".join(tables + [profile_table(r) for r in results if r.profile])


def profile_table(result: Result) -> str:
    """The profiled run's top functions of swarm and workers (py-spy, GIL samples)."""
    lines = [f"Worker profile, {result.scenario}, {result.client} (share of CPU samples: a "
             "package running its own code, then a function on the stack):", "",
             "| share | package or function |", "|---:|---|"]  # fmt: skip
    lines += [f"| {share:.1%} | {name} |" for name, share in result.profile]
    return "\n".join(lines) + "\n"


def commands_table(results: list[Result], least: float = 0.01) -> str:
    """Redis commands per call by name, one column per client (scenario a when run): every
    command some client sent at least ``least`` times per call."""
    chosen = [r for r in results if r.scenario.startswith("a ")] or results

    def per_call(r: Result, name: str) -> float:
        return r.sample.commands.get(name, 0.0) / max(r.sample.calls, 1)

    names = {name for r in chosen for name in r.sample.commands if per_call(r, name) >= least}
    ordered = sorted(names, key=lambda name: -max(per_call(r, name) for r in chosen))
    head = f"Redis commands per call, {chosen[0].scenario} (scripts: {', '.join(SCRIPT_CALLS)}; "
    head += "the commands scripts run inside are counted by name too):\n\n"
    cols = " | ".join(r.client for r in chosen)
    lines = [f"| command | {cols} |", "|---|" + "---:|" * len(chosen)]
    for name in ordered:
        cells = " | ".join(f"{per_call(r, name):.2f}" for r in chosen)
        lines.append(f"| {name} | {cells} |")
    return head + "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--catalog",
        action="append",
        help="packaged, no-default-backend, far-limits, far-limits-no-default-backend or a "
        "path (repeatable)",
    )
    parser.add_argument("--only", default="a,b", help="scenarios: a, b or a,b")
    parser.add_argument("--inputs", type=int, default=2000, help="inputs of scenario a")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument(
        "--profile", type=Path, help="folder: py-spy the workers' first run of scenario a"
    )
    args = parser.parse_args()
    catalogs = args.catalog or ["far-limits", "far-limits-no-default-backend"]
    wanted = {s.strip() for s in args.only.split(",")}
    results: list[Result] = []
    with (
        tempfile.TemporaryDirectory(prefix="hosted-speed-") as tmp,
        procs.redis_server(Path(tmp)) as url,
    ):
        bench = Bench(Path(tmp), url, args.repeat)
        if "a" in wanted:
            results += throughput(bench, catalogs, args.inputs, args.profile)
        if "b" in wanted:
            results += critical_path(bench, catalogs)
    header = (
        f"`python ops/bench/hosted_speed.py {' '.join(sys.argv[1:])}` at "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    table = markdown(results, header)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(table + "\n", "utf-8")
    print(table)


if __name__ == "__main__":
    main()
