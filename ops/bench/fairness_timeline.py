"""Where a small job's seconds go beside a large one: scenario 1 of ops/bench/fairness.py
with a timeline per node of B (ops/bench/timeline_app.py), alone and beside A.

Per node of B, the mean, p50, p90 and max of: submit to its message received by a worker
(``pub``), received to started (``recv``), started to the node's thread running it
(``pre``), to its first admission ask (``nstart``), first ask to admitted (``wait``),
admitted to its permit finished (``call``); and per second, the asks of each tenant by
outcome.

    python ops/bench/fairness_timeline.py [--warmup-s 20] [--keep DIR]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fairness as F

from swarm.bench import procs
from swarm.bench.sweep import swarm_env
from swarm.client import SwarmClient
from swarm.settings import Settings

PHASES = (("pub", None, "recv"), ("recv", "recv", "pre"), ("pre", "pre", "nstart"),
          ("nstart", "nstart", "ask"), ("wait", "ask", "ok"), ("call", "ok", "fin"))  # fmt: skip


@contextmanager
def stack(folder: Path) -> Iterator[SwarmClient]:
    folder.mkdir(parents=True, exist_ok=True)
    path = F.catalog(folder / "catalog.toml", {})
    sim_args = ["--ttft-ms", str(F.TTFT_MS), "--tokens-per-s", str(F.TOKENS_PER_S)]
    with procs.redis_server(folder) as url, procs.sim(folder, sim_args) as sim:
        env = {**os.environ, **swarm_env(url, sim.base_url, path, F.THREADS)}
        env["SWARM_NODE_THREADS"] = str(F.NODE_THREADS)
        env["TL_DIR"] = str(folder)
        env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parent), env.get("PYTHONPATH", "")])
        with procs.workers(folder, env, 2, F.THREADS, F.QUEUE, app="timeline_app"):
            settings = Settings(broker_url=url, base_url=sim.base_url, api_key="sk-bench",  # type: ignore[arg-type]
                                config=path)  # fmt: skip
            yield SwarmClient.from_settings(settings)


def run_b(client: SwarmClient) -> tuple[float, str]:
    start = time.time()
    handle = client.submit(F.items(F.JOB_INPUTS, F.SHORT, "team-b"), "Summarise", tenant="team-b")
    assert handle.wait(timeout=F.TIMEOUT_S).status == "succeeded"
    return start, handle.id


def events(folder: Path) -> list[dict[str, Any]]:
    out = []
    for path in folder.glob("tl-*.jsonl"):
        for line in path.read_text("utf-8").splitlines():
            try:
                out.append({**json.loads(line), "pid": path.name})
            except ValueError:  # a line cut off when the worker stopped
                continue
    return sorted(out, key=lambda e: e["t"])


def timeline(folder: Path, t0: float, job: str) -> dict[str, dict[str, float]]:
    """Per node of ``job``: when each step happened (seconds since ``t0``)."""
    evs, received, nodes = events(folder), {}, {}
    for e in evs:
        args = e.get("args")
        if e["k"] == "recv" and args and args[0] == job:
            received[e["id"]] = e["t"]
        if e["k"] == "prerun" and args and args[0] == job:
            for n in (n for n in args[1] if isinstance(n, str)):
                nodes.setdefault(n, {"pid": e["pid"], "recv": received.get(e["id"], e["t"]),
                                     "pre": e["t"]})  # fmt: skip
    for e in evs:
        row = nodes.get(e.get("node"))  # type: ignore[arg-type]
        if not row or e["pid"] != row["pid"] or e["t"] < row["pre"]:
            continue
        if e["k"] == "nstart":
            row.setdefault("nstart", e["t"])
        if e["k"] in ("ask", "fin") and e.get("job") == job:
            row.setdefault("ask" if e["k"] == "ask" else "fin", e["t"])
            if e["k"] == "ask" and e["ok"]:
                row.setdefault("ok", e["t"])
    return {n: {k: v - t0 for k, v in r.items() if k != "pid"} for n, r in nodes.items()}


def phase_lines(name: str, rows: dict[str, dict[str, float]]) -> list[str]:
    lines = [
        f"{name}: {len(rows)} nodes",
        "| phase | mean | p50 | p90 | max |",
        "|---|---:|---:|---:|---:|",
    ]
    for phase, a, b in PHASES:
        xs = sorted(
            r[b] - (r[a] if a else 0.0) for r in rows.values() if b in r and (a is None or a in r)
        )
        if xs:
            cells = [sum(xs) / len(xs), xs[len(xs) // 2], xs[int(0.9 * len(xs))], xs[-1]]
            lines.append(f"| {phase} | " + " | ".join(f"{x:.2f}" for x in cells) + " |")
    return lines


def asks_per_second(folder: Path, t0: float, span: float) -> list[str]:
    bins: dict[int, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for e in events(folder):
        if e["k"] == "ask" and -3 <= e["t"] - t0 <= span:
            bins[int((e["t"] - t0) // 1)][f"{e['ten']}:{'ok' if e['ok'] else e['why']}"] += 1
    return [
        f"{b:4d} s " + " ".join(f"{k}={v}" for k, v in sorted(c.items()))
        for b, c in sorted(bins.items())
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--warmup-s", type=float, default=20.0)
    parser.add_argument("--keep", type=Path, default=None, help="keep the event logs here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fairness-tl-") as tmp:
        root = args.keep or Path(tmp)
        with stack(root / "alone") as client:
            t_alone, job_alone = run_b(client)
            alone_s = time.time() - t_alone
        with stack(root / "beside") as client:
            big = client.submit(F.items(10_000, F.SHORT, "team-a"), "Summarise", tenant="team-a")
            time.sleep(args.warmup_s)
            t_beside, job_beside = run_b(client)
            beside_s = time.time() - t_beside
            big.cancel()
        print(f"B alone {alone_s:.1f} s, beside A {beside_s:.1f} s: {beside_s / alone_s:.2f}x; "
              f"load average {os.getloadavg()[0]:.1f}")  # fmt: skip
        print("\n".join(phase_lines("alone", timeline(root / "alone", t_alone, job_alone))))
        print("\n".join(phase_lines("beside", timeline(root / "beside", t_beside, job_beside))))
        print("asks per second beside A (tenant:outcome):")
        print("\n".join(asks_per_second(root / "beside", t_beside, beside_s)))


if __name__ == "__main__":
    main()
