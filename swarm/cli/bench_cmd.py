"""`swarm bench sweep`, `swarm bench goodput` and `swarm bench overhead`: benchmarks on
local processes only."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

DEFAULT_OUT = Path("ops/bench/results")
OUT = click.option("--out", type=click.Path(path_type=Path), default=DEFAULT_OUT, show_default=True)
"""Where a benchmark writes its results file (every benchmark takes it)."""


def _count(flag: str, default: int, help: str | None = None) -> Callable[[Any], Any]:
    """A whole-number option of at least 1 (tasks, workers, rounds), its default shown."""
    return click.option(
        flag, type=click.IntRange(min=1), default=default, show_default=True, help=help
    )


def _levels(text: str) -> list[int]:
    try:
        levels = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise click.BadParameter("a comma-separated list of integers") from None
    if not levels or min(levels) < 1:
        raise click.BadParameter("at least one level, each >= 1")
    return levels


@click.group(name="bench")
def bench_group() -> None:
    """Benchmarks against `swarm sim` on this machine (redis-server, workers, simulator)."""


@bench_group.command(name="sweep")
@click.option("--concurrency", "levels", default="20,50,100,200", show_default=True)
@_count("--tasks", 800, help="Tasks per point: the same job at every concurrency.")
@_count("--workers", 4)
@OUT
def sweep_command(levels: str, tasks: int, workers: int, out: Path) -> None:
    """Seed 000 table: baseline asyncio+semaphore client vs swarm, per concurrency."""
    from swarm.bench.output import sweep_markdown, sweep_plot
    from swarm.bench.sweep import run_sweep

    points = _levels(levels)
    tasks_for = dict.fromkeys(points, tasks)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="swarm-bench-") as folder:
        rows = run_sweep(Path(folder), points, tasks_for, workers)
    table = sweep_markdown(rows)
    (out / "sweep.md").write_text(table, "utf-8")
    click.echo(table)
    click.echo(sweep_plot(rows, out / "sweep.png"))


@bench_group.command(name="goodput")
@click.option("--duration-s", type=click.FloatRange(min=10), default=180.0, show_default=True)
@_count("--rpm", 600)
@_count("--workers", 3)
@_count("--concurrency", 16, help="Threads per worker process.")
@OUT
def goodput_command(duration_s: float, rpm: int, workers: int, concurrency: int, out: Path) -> None:
    """Successful calls per minute against a simulator enforcing --rpm, and the 429 share."""
    from swarm.bench.goodput import run_goodput
    from swarm.bench.output import goodput_markdown

    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="swarm-bench-") as folder:
        result = run_goodput(Path(folder), duration_s, rpm, workers, concurrency)
    table = goodput_markdown(result, workers)
    (out / "goodput.md").write_text(table, "utf-8")
    click.echo(table)


@bench_group.command(name="peers")
@_count("--rounds", 2)
@click.option(
    "--only",
    default="",
    help="Rows to run, by number or name, comma-separated (1 clean, 2 noisy, 3 faulty, "
    "4 rpm-cap, 5 seed-like, 6 fast-errors); default all.",
)
@OUT
def peers_command(rounds: int, only: str, out: Path) -> None:
    """The seeds' asyncio + semaphore script vs swarm (2 workers, submit to report) on the
    same gateway: clean, noisy (10% and 30% 429 + 5xx), a 60 RPM cap, a seed-like 80
    requests/s cap and a hosted-like one (30% 429 + 30% 5xx at once, answers after 0.2 s);
    one fresh simulator per client and row. The rows run replace theirs in peers.md, the
    others stay."""
    from swarm.bench.output import peers_markdown
    from swarm.bench.peers import merge_table, pick_rows, run_peers

    try:
        rows = pick_rows(only)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--only") from None
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="swarm-bench-") as folder:
        results = run_peers(Path(folder), rows, rounds)
    table = peers_markdown(results)
    path = out / "peers.md"
    previous = path.read_text("utf-8") if path.exists() else ""
    path.write_text(merge_table(previous, table), "utf-8")
    click.echo(table)


@bench_group.command(name="overhead")
@click.option(
    "--only",
    default="a,b,b',c,d",
    show_default=True,
    help="Scenarios to run (see `swarm bench overhead --help` text).",
)
@_count("--repeat", 3)
@OUT
def overhead_command(only: str, repeat: int, out: Path) -> None:
    """Plain Celery chord vs swarm: (a) 100 x 1 s + 1 s aggregation vs the ideal 2 s,
    (b) seed 000 latency with and without hedging (b': with 2% hung requests),
    (c) calls/s at 0 ms over 2,000 inputs, (d) worker RSS at 100 calls in flight."""
    from swarm.bench import procs
    from swarm.bench.output import overhead_markdown
    from swarm.bench.overhead import Bench
    from swarm.bench.overhead_runs import SCENARIOS

    wanted = [name.strip() for name in only.split(",") if name.strip()]
    unknown = [name for name in wanted if name not in SCENARIOS]
    if unknown:
        raise click.BadParameter(f"unknown scenario {unknown[0]!r}; known: {', '.join(SCENARIOS)}")
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    with (
        tempfile.TemporaryDirectory(prefix="swarm-bench-") as folder,
        procs.redis_server(Path(folder)) as redis_url,
    ):
        bench = Bench(Path(folder), redis_url, repeat)
        for name in wanted:
            rows += SCENARIOS[name](bench)
            click.echo(overhead_markdown(rows), err=True)
    table = overhead_markdown(rows)
    (out / "overhead.md").write_text(table, "utf-8")
    click.echo(table)
