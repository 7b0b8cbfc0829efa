"""Agent nodes at scale: 100 nodes x 4 model steps (3 tool rounds, then the answer) at a
fixed 1.0 s per model call, plus a 1.0 s aggregation. Ideal wall: 4 x 1.0 + 1.0 = 5.0 s.

    python ops/bench/agent_steps.py                 # 3 runs, prints a table
    python ops/bench/agent_steps.py --runs 5 --nodes 100 --steps 4 --workers 2 -c 50

A private redis-server, `swarm sim --latency-ms 1000`, and worker processes (threads pool)
with admission on: a one-model catalog with max_inflight = the node count (every node's step
may be in flight at once, never more) and no rate limit in the way. Each run checks: the
gateway served nodes x steps + 1 calls, the ledger billed exactly those, the simulator saw
at most max_inflight requests in flight and no 429.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from swarm.bench import procs
from swarm.bench.sweep import QUEUE, bench_catalog, swarm_env, swarm_settings
from swarm.client import SwarmClient
from swarm.records import InputItem

HERE = Path(__file__).resolve().parent
AGGREGATE = "Merge the results. [[sim:latency_ms=1000]]"


def run_once(
    client: SwarmClient, sim: procs.Sim, nodes: int, steps: int, tag: str
) -> dict[str, float]:
    """One job; its wall time and the checks."""
    marker = f"[[sim:tool_steps={steps - 1}]]"
    items = [InputItem(ref=f"in-{i}", text=f"item {i} {tag} {marker}") for i in range(nodes)]
    time.sleep(1.1)  # the simulator's 1 s windows clear
    sim.reset()
    started = time.perf_counter()
    tools = "bench_tools" if steps > 1 else None
    handle = client.submit(items, "Look the item up, then answer", aggregate_instruction=AGGREGATE,
                           tools=tools)  # fmt: skip
    report = handle.wait(600).to_dict()
    wall = time.perf_counter() - started
    stats = sim.stats()
    ledger_calls = sum(m["calls"] for m in report["models"].values())
    node_steps = sum(n["steps"] for n in report["nodes"])
    return {
        "steps": steps,
        "wall_s": wall,
        "status_ok": float(report["status"] == "succeeded"),
        "calls": stats["completed"],
        "ledger_calls": ledger_calls,
        "node_steps": node_steps,
        "max_inflight_seen": stats["max_inflight_seen"],
        "rate_limited": stats["rate_limited"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("-c", "--concurrency", type=int, default=50)
    args = parser.parse_args()
    ideal = args.steps * 1.0 + 1.0
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        with procs.redis_server(folder) as url, procs.sim(folder, ["--latency-ms", "1000"]) as sim:
            catalog = bench_catalog(folder, rpm=60_000_000, rps=None, max_inflight=args.nodes)
            env = swarm_env(url, sim.base_url, catalog, args.concurrency)
            # bench_tools beside this script, ahead of any tree the caller put on PYTHONPATH
            env["PYTHONPATH"] = os.pathsep.join(
                filter(None, [str(HERE), os.environ.get("PYTHONPATH")])
            )
            with procs.workers(folder, env, args.workers, args.concurrency, QUEUE):
                client = SwarmClient.from_settings(swarm_settings(env))
                for run in range(args.runs):
                    for steps in (args.steps, 1):  # side by side: agents, then plain nodes
                        tag = f"r{run}-{time.time()}"
                        rows.append(run_once(client, sim, args.nodes, steps, tag))
                client.app.backend.result_consumer.stop()
    print_table(rows, args.nodes)
    agents = [r for r in rows if r["steps"] == args.steps]
    walls = [r["wall_s"] for r in agents]
    plain = statistics.median(r["wall_s"] / 2.0 for r in rows if r["steps"] == 1)
    expected = args.nodes * args.steps + 1
    ok = all(r["calls"] == r["ledger_calls"] == expected and r["status_ok"] for r in agents)
    held = all(r["max_inflight_seen"] <= args.nodes and r["rate_limited"] == 0 for r in rows)
    print(f"\nagents: median wall {statistics.median(walls):.2f} s = "
          f"{statistics.median(walls) / ideal:.3f} x ideal {ideal:.1f} s (target <= 1.15); "
          f"plain nodes in the same run: {plain:.3f} x ideal 2.0 s; calls == {expected} "
          f"and ledger == calls in every run: {ok}; admission limits held: {held}")  # fmt: skip
    sys.exit(0 if ok and held else 1)


def print_table(rows: list[dict[str, float]], nodes: int) -> None:
    print("| job | wall (s) | x ideal | calls | ledger calls | node steps | max in flight | 429s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        steps = int(row["steps"])
        ideal = steps + 1.0
        name = f"{nodes} x {steps} steps" + (" (plain, no tools)" if steps == 1 else "")
        print(f"| {name} | {row['wall_s']:.2f} | {row['wall_s'] / ideal:.3f} | {row['calls']} | "
              f"{row['ledger_calls']} | {row['node_steps']} | {row['max_inflight_seen']} | "
              f"{row['rate_limited']} |")  # fmt: skip


if __name__ == "__main__":
    main()
