"""Issue 25's "Done when" measurement: one job with a deadline through the Batch API, and the
same job live, side by side.

A private redis-server, `swarm sim` (live calls answered in ``--latency-ms``, a batch in
``--processing-s``), ``--workers`` `celery -A workers worker` processes of ``-c`` threads.
The same ``--inputs`` documents run twice: with ``--deadline`` (batch) and without (live).
Prints per run: wall time, cost, cost of the sub-agents, batch calls and saving, ledger
tokens against what the simulator billed, batches created; and Celery's active tasks over
time (``inspect().active()`` each ``--sample-s``: the threads busy running a task) with the
countdown messages held (``scheduled``), to show that no thread waits while the batch runs.

    python ops/bench/batch.py                              # 1,000 inputs, --deadline 1h
    python ops/bench/batch.py --inputs 200 --processing-s 10
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from swarm.bench.procs import redis_server, sim, workers
from swarm.client import SwarmClient
from swarm.cost.pricing import cost_usd
from swarm.records import InputItem, Usage
from swarm.settings import Settings

KEY = "sk-bench-batch"
MODEL = "kimi-k2.5"


def sample_tasks(client: SwarmClient, every_s: float, stop: threading.Event,
                 out: list[tuple[float, int, int]]) -> None:  # fmt: skip
    """Append (seconds since start, active tasks, scheduled countdowns) until ``stop``."""
    start = time.monotonic()
    while not stop.is_set():
        inspect = client.app.control.inspect(timeout=1.0)
        active = sum(len(v) for v in (inspect.active() or {}).values())
        scheduled = sum(len(v) for v in (inspect.scheduled() or {}).values())
        out.append((time.monotonic() - start, active, scheduled))
        stop.wait(every_s)


def run(client: SwarmClient, stats: Any, items: list[InputItem], deadline_s: float | None,
        sample_s: float) -> dict[str, Any]:  # fmt: skip
    """One job, its report, the simulator's counters and the task samples."""
    stats.reset()
    samples: list[tuple[float, int, int]] = []
    stop = threading.Event()
    sampler = threading.Thread(target=sample_tasks, args=(client, sample_s, stop, samples))
    sampler.start()
    try:
        # Each run's own aggregation prompt: the second is not served from the simulator's
        # prompt cache (the sub-agents' prompts are the same in both runs, and too short).
        merge = f"Merge the figures ({'batch' if deadline_s else 'live'} run)"
        handle = client.submit(
            items, "Extract the figures", aggregate_instruction=merge, deadline_s=deadline_s
        )
        report = handle.wait(timeout=(deadline_s or 1800) + 600).to_dict()
    finally:
        stop.set()
        sampler.join()
    return {"report": report, "stats": stats.stats(), "samples": samples}


def node_cost(client: SwarmClient, report: dict[str, Any], stats: dict[str, Any]) -> float:
    """The sub-agents' share of the report's cost (the aggregation, live, taken out)."""
    spec = client.catalog.model(MODEL)
    line = report["models"][MODEL]
    live_nodes = line["calls"] - line["batch_calls"] - 1
    aggregation = Usage(prompt_tokens=stats["prompt_tokens"],
                        completion_tokens=stats["completion_tokens"])  # fmt: skip
    if live_nodes:  # the live job: the aggregation is the last live call's share
        node_usage = sum((Usage(**n["usage"]) for n in report["nodes"]), Usage())
        return cost_usd(spec, node_usage)
    return float(line["cost_usd"]) - cost_usd(spec, aggregation)


def row(name: str, client: SwarmClient, result: dict[str, Any]) -> str:
    report, stats = result["report"], result["stats"]
    line = report["models"][MODEL]
    batch = stats["batch"]
    ledger = line["prompt_tokens"] + line["completion_tokens"]
    billed = (batch["prompt_tokens"] + batch["completion_tokens"] + stats["prompt_tokens"]
              + stats["completion_tokens"])  # fmt: skip
    via = {v: sum(1 for n in report["nodes"] if n["via"] == v) for v in ("batch", "live")}
    return (
        f"| {name} | {report['status']} | {report['wall_s']:.1f} | {report['cost_usd']:.6f} | "
        f"{node_cost(client, report, stats):.6f} | {line['batch_calls']} | "
        f"{line['saved_usd']:.6f} | {via['batch']}/{via['live']} | {ledger} | {billed} | "
        f"{batch['batches_created']} |"
    )


def timeline(name: str, samples: list[tuple[float, int, int]]) -> list[str]:
    """Active tasks and held countdowns over time, a row per sample."""
    lines = [f"\n{name}: active tasks (threads running a task) / countdowns held, over time\n",
             "| t (s) | active | countdowns |", "|---:|---:|---:|"]  # fmt: skip
    lines += [f"| {t:.1f} | {active} | {held} |" for t, active, held in samples]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=int, default=1000)
    parser.add_argument("--deadline", type=float, default=3600.0, help="seconds (1h)")
    parser.add_argument("--processing-s", type=float, default=30.0)
    parser.add_argument("--latency-ms", type=float, default=300.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("-c", "--concurrency", type=int, default=16)
    parser.add_argument("--sample-s", type=float, default=2.0)
    args = parser.parse_args()
    items = [InputItem(ref=f"doc-{i}.txt", text=f"document {i}: revenue {i * 7} k, cost {i} k")
             for i in range(args.inputs)]  # fmt: skip
    sim_args = ["--latency-ms", str(args.latency_ms), "--batch-processing-s",
                str(args.processing_s), "--seed", "25"]  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="swarm-bench-batch-") as tmp:
        folder = Path(tmp)
        with redis_server(folder) as url, sim(folder, sim_args) as gateway:
            env = {"SWARM_BROKER_URL": url, "SWARM_BASE_URL": gateway.base_url,
                   "SWARM_API_KEY": KEY}  # fmt: skip
            with workers(folder, env, args.workers, args.concurrency, "llm.kimi-k2.5"):
                client = SwarmClient.from_settings(
                    Settings(broker_url=url, base_url=gateway.base_url, api_key=KEY)  # type: ignore[arg-type]
                )
                batch = run(client, gateway, items, args.deadline, args.sample_s)
                live = run(client, gateway, items, None, args.sample_s)
    print(f"\n{args.inputs} inputs, deadline {args.deadline:.0f} s, batch processing "
          f"{args.processing_s:.0f} s, live latency {args.latency_ms:.0f} ms, "
          f"{args.workers} workers x {args.concurrency} threads\n")  # fmt: skip
    print("| run | status | wall s | cost USD | sub-agents USD | batch calls | saved USD | "
          "via batch/live | ledger tokens | simulator billed | batches |")  # fmt: skip
    print("|---|---|---:|---:|---:|---:|---:|---|---:|---:|---:|")
    print(row("--deadline", client, batch))
    print(row("live", client, live))
    ratio = node_cost(client, batch["report"], batch["stats"]) / max(
        node_cost(client, live["report"], live["stats"]), 1e-12
    )
    print(f"\nsub-agents' cost, batch / live: {ratio:.3f}")
    busy = [a for t, a, _ in batch["samples"] if 3 < t < batch["report"]["wall_s"] - 3]
    print(f"active tasks while the batch ran (t in 3 s .. wall - 3 s): max {max(busy, default=0)}")
    print("\n".join(timeline("--deadline", batch["samples"])))
    print("\n".join(timeline("live", live["samples"])))


if __name__ == "__main__":
    main()
