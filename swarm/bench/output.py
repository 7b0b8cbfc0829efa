"""Benchmark output: markdown tables and the PNG plot (matplotlib, the optional `bench`
extra; without it the PNG is skipped with a message)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from swarm.bench.goodput import Goodput
from swarm.bench.overhead import Row as OverheadRow
from swarm.bench.peers import Result as PeersResult
from swarm.bench.peers import Run as PeersRun
from swarm.bench.sweep import Row

SWEEP_HEADER = (
    "| client | concurrency | tasks | p50 (ms) | p99 (ms) | success | throughput (tasks/s) "
    "| 429s seen |\n|---|---:|---:|---:|---:|---:|---:|---:|\n"
)


def sweep_markdown(rows: Sequence[Row]) -> str:
    """The seed table, both clients interleaved by concurrency."""
    lines = [
        f"| {r.client} | {r.concurrency} | {r.tasks} | {r.p50_ms:.0f} | {r.p99_ms:.0f} "
        f"| {r.success_pct:.1f}% | {r.throughput:.1f} | {r.rate_limited} |"
        for r in rows
    ]
    return SWEEP_HEADER + "\n".join(lines) + "\n" + target_line(rows)


def target_line(rows: Sequence[Row]) -> str:
    """The verdict under the table: each client's worst point vs the baseline's best."""
    base = [r for r in rows if r.client == "baseline"]
    if not base:
        return ""
    best = max(base, key=lambda r: r.throughput)
    out = [f"\nbaseline's best: {best.throughput:.1f} tasks/s (C={best.concurrency})."]
    for client in dict.fromkeys(r.client for r in rows if r.client != "baseline"):
        own = [r for r in rows if r.client == client]
        worst = min(own, key=lambda r: r.throughput)
        full = all(r.success_pct == 100.0 for r in own)
        verdict = "at or above" if worst.throughput >= best.throughput else "below"
        out.append(
            f"{client}: lowest {worst.throughput:.1f} tasks/s (C={worst.concurrency}), "
            f"{verdict} the baseline's best; success 100% at every point: "
            f"{'yes' if full else 'no'}."
        )
    return "\n".join(out) + "\n"


def goodput_markdown(g: Goodput, workers: int) -> str:
    """The goodput result as a small table."""
    return (
        "| duration (s) | workers | RPM cap | successful calls/min | share of cap "
        "| requests | 429s | 429 share | max admitted in 60 s |\n"
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"
        f"| {g.duration_s:.0f} | {workers} | {g.rpm_cap} | {g.per_minute:.1f} "
        f"| {g.share_of_cap:.1%} | {g.requests} | {g.rate_limited} | {g.share_429:.2%} "
        f"| {g.max_60s} |\n"
    )


def sweep_plot(rows: Sequence[Row], path: Path) -> str:
    """Throughput and success vs concurrency as a PNG; returns a line saying what happened."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "PNG skipped: matplotlib is not installed (pip install -e '.[bench]')"
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for client in dict.fromkeys(r.client for r in rows):
        mine = [r for r in rows if r.client == client]
        levels = [r.concurrency for r in mine]
        left.plot(levels, [r.throughput for r in mine], marker="o", label=client)
        right.plot(levels, [r.success_pct for r in mine], marker="o", label=client)
    left.set(xlabel="concurrency", ylabel="throughput (tasks/s)", title="Throughput")
    right.set(xlabel="concurrency", ylabel="success (%)", title="Success rate")
    for axis in (left, right):
        axis.grid(True, alpha=0.3)
        axis.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return f"plot written to {path}"


TARGETS = {
    "a": "<= 1.10",
    "b": "hedged <= 1.6, extra <= 10%",
    "c": ">= 400 and >= 2x plain",
    "d": "<= 150",
}


def overhead_markdown(rows: Sequence[OverheadRow]) -> str:
    """`swarm bench overhead`: one line per scenario and client, with the issue's target."""
    lines = [
        "| scenario | client | figure | unit | target | measured |",
        "|---|---|---:|---|---|---|",
    ]
    for r in rows:
        target = TARGETS.get(r.scenario.split()[0].rstrip("'"), "")
        lines.append(
            f"| {r.scenario} | {r.client} | {r.value:.2f} | {r.unit} | {target} | {r.detail} |"
        )
    return "\n".join(lines) + "\n"


def peers_markdown(results: Sequence[PeersResult]) -> str:
    """`swarm bench peers`: both clients per gateway, every round, and the targets."""
    lines = [
        "| gateway | seeds' asyncio script | swarm, 2 workers | wall swarm / script | target met |",
        "|---|---|---|---|---|",
    ]
    for r in results:
        ratios = [s.wall_s / b.wall_s for s, b in zip(r.swarm, r.script, strict=True)]
        lines.append(
            f"| {r.gateway.name} | {_runs(r.script)} | {_runs(r.swarm)} "
            f"| {', '.join(f'{x:.2f}x' for x in ratios)} | {_verdict(r, ratios)} |"
        )
    return "\n".join(lines) + "\n"


def _runs(runs: Sequence[PeersRun]) -> str:
    return "; ".join(f"{x.ok}/{x.total}, {x.wall_s:.1f} s, {x.rate_limited} x 429" for x in runs)


def _verdict(r: PeersResult, ratios: Sequence[float]) -> str:
    """Issue targets: success >= the script's, wall within 1.2x (1.5x on a clean
    gateway), fewer 429s where the gateway has a cap."""
    limit = r.gateway.wall_target
    misses = []
    if any(s.ok < b.ok for s, b in zip(r.swarm, r.script, strict=True)):
        misses.append("fewer successes")
    if any(x > limit for x in ratios):
        misses.append(f"wall > {limit}x")
    if r.gateway.capped and any(
        s.rate_limited >= max(b.rate_limited, 1) for s, b in zip(r.swarm, r.script, strict=True)
    ):
        misses.append("not fewer 429s")
    return "yes" if not misses else "no: " + ", ".join(misses)
