"""The worker's CPU per node, in one process, without Celery: where a hosted call spends it.

Starts a private redis-server and `swarm sim --latency-ms 0`, builds the workers' Runtime
(workers.process.from_settings, the far-limits catalog of ops/bench/hosted_speed.py) and
runs the nodes of fresh jobs through swarm.jobs.batch.run_nodes, ``--batch`` nodes a call,
each node on the calling thread (no thread contention: the figure does not move with the
machine's load as the end-to-end bench's does). Prints, per node:

- Python function calls (sys.setprofile over 100 nodes; does not depend on the load), in
  all and by the section of the call path they ran under (the SDK's request without the
  HTTP client's part, the HTTP client, the Redis pipelines, the answer's parsing, the rest);
- CPU ms (time.process_time over ``--nodes`` nodes, ``--rounds`` times).

Compare two trees side by side with PYTHONPATH (a tree exported with `git archive`):

    python ops/bench/node_cpu.py --nodes 1500 --rounds 3
    PYTHONPATH=/tmp/main73 python ops/bench/node_cpu.py --nodes 1500 --rounds 3
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import os
import pstats
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Executor, Future
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

import hosted_speed

from swarm.bench import procs
from swarm.bench.overhead import Bench


class Inline(Executor):
    """Runs each node at once on the calling thread."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # the batch reads it as the node's outcome
            future.set_exception(exc)
        return future


def sections() -> dict[CodeType, str]:
    """The functions whose calls are counted as one section (the innermost wins)."""
    import openai._base_client
    from httpx2 import Client

    from swarm.calls import gateway
    from swarm.jobs import batch
    from swarm.store.durable import Durable

    named = {
        openai._base_client.SyncAPIClient.post: "openai SDK (its own part)",
        Client.send: "httpx2 / httpcore2 / h11",
        Durable.write: "redis-py pipelines",
        gateway.parse_answer: "answer parsing",
        batch.run_nodes: "swarm and the rest",
    }
    return {fn.__code__: label for fn, label in named.items()}


def count_calls(run: Callable[[], None]) -> collections.Counter[str]:
    """Python (and C) function calls made by ``run``, by section."""
    codes = sections()
    counts: collections.Counter[str] = collections.Counter()

    def profile(frame: FrameType, event: str, _arg: Any) -> None:
        if event not in ("call", "c_call"):
            return
        at: FrameType | None = frame
        while at is not None:
            if (label := codes.get(at.f_code)) is not None:
                counts[label] += 1
                return
            at = at.f_back
        counts["outside"] += 1

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=15, help="nodes per run_nodes call")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="also print cProfile's N costliest functions (100 nodes)")  # fmt: skip
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        with procs.redis_server(folder) as url, procs.sim(folder, ["--latency-ms", "0"]) as sim:
            bench = Bench.__new__(Bench)
            bench.folder = folder
            catalog = hosted_speed.catalog_path("far-limits", bench)
            os.environ.update({"SWARM_BROKER_URL": url, "SWARM_BASE_URL": sim.base_url,
                               "SWARM_API_KEY": "k", "SWARM_CONFIG": str(catalog)})  # fmt: skip
            measure(args)
    # After the private redis-server and simulator are stopped (leaving the block), not
    # inside it: os._exit skips their clean-up, and every run left both running. Exit
    # without waiting for the Runtime's heartbeat and pool threads.
    os._exit(0)


def measure(args: argparse.Namespace) -> None:
    from swarm.jobs.batch import run_nodes
    from swarm.records import JobSpec
    from swarm.settings import load_settings
    from workers import process

    rt = process.from_settings(load_settings())
    inline = Inline()

    def job(n: int) -> JobSpec:
        ids = tuple(f"n{i}" for i in range(n))
        spec = JobSpec(job_id=uuid.uuid4().hex, instruction="Review this diff",
                       aggregate_instruction="merge", model="kimi-k2.5",
                       aggregate_model="kimi-k2.5", node_ids=ids,
                       input_refs=tuple(f"f{i}.py" for i in range(n)),
                       submitted_at=time.time())  # fmt: skip
        rt.store.create_job(spec, [f"diff --git a/f{i}.py\n+x = {i}  # {spec.job_id}\n"
                                   for i in range(n)])  # fmt: skip
        return spec

    def run(spec: JobSpec) -> None:
        ids = spec.node_ids
        for at in range(0, len(ids), args.batch):
            outcome = run_nodes(rt, spec.job_id, ids[at : at + args.batch], pool=inline)
            assert all(env.ok for env in outcome.envelopes)

    run(job(600))  # warm-up: connections, imports, scripts loaded
    small = job(100)
    counts = count_calls(lambda: run(small))
    if args.profile:
        profiled = cProfile.Profile()
        profiled.runcall(run, job(100))
        pstats.Stats(profiled).sort_stats("tottime").print_stats(args.profile)
    cpu = []
    for _ in range(args.rounds):
        spec = job(args.nodes)
        started = time.process_time()
        run(spec)
        cpu.append(1000 * (time.process_time() - started) / args.nodes)
    print(f"Python calls per node: {sum(counts.values()) / 100:.0f}")
    for label, n in counts.most_common():
        print(f"  {label:28s} {n / 100:6.0f}")
    print("CPU ms per node: " + ", ".join(f"{c:.3f}" for c in cpu)
          + f" (load average {os.getloadavg()[0]:.1f})")  # fmt: skip


if __name__ == "__main__":
    main()
