"""The node-counted intake (workers/intake.py), measured where it matters: workers that
join a job already under way (scale-out), on the Redis broker and on RabbitMQ.

Per broker: a private redis-server (the job store; the broker for ``redis``), for ``amqp``
a RabbitMQ vhost of its own on 127.0.0.1:5672 (guest/guest), the simulator answering every
call in ``--latency-ms``, and `celery -A workers worker` processes (``-c`` task threads,
``--node-threads`` node threads). A job of ``--inputs`` nodes in ``--nodes-per-task``-node
messages goes to one worker; ``--joiners`` more start once it received a message. Prints, per
worker, the most nodes it held (received, not finished, sampled every 0.1 s) and the nodes it
ran, and the job's wall time. With Celery's prefetch alone the first worker takes ``-c``
messages and the joiners find little left; with the count it holds what its node threads
can run and the joiners take the rest.

    python ops/bench/intake.py                       # both brokers
    python ops/bench/intake.py --brokers amqp --runs 3

For the figure without the count, run this file from a checkout of an older commit (its
directory as the working directory and on PYTHONPATH): the workers run that checkout's code.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from takeover import Bench, held_nodes, inputs, nodes_of, task_ids, wait_until

from swarm.procs import Process


def sample(bench: Bench, workers: list[Process], job_id: str, stop: threading.Event) -> list[int]:
    """The most nodes each of ``workers`` (a list that grows) held while ``stop`` is unset."""
    client, most = bench.client(), [0] * 100
    while not stop.wait(0.1):
        for i, worker in enumerate(list(workers)):
            most[i] = max(most[i], len(held_nodes(client, worker.log_text(), job_id)))
    return most[: len(workers)]


def run(bench: Bench, args: argparse.Namespace, tag: str) -> dict[str, Any]:
    first = bench.workers(1, f"{tag}a")
    client = bench.client()
    handle = client.submit(inputs(args.inputs, tag), "Summarise this document")
    wait_until(lambda: bool(task_ids(first[0].log_text(), handle.id, "received")), 120, "a message")
    stop, result = threading.Event(), {}
    workers = list(first)
    thread = threading.Thread(
        target=lambda: result.update(most=sample(bench, workers, handle.id, stop))
    )
    thread.start()
    workers += bench.workers(args.joiners, f"{tag}j")
    report = handle.wait(timeout=1200).to_dict()
    stop.set()
    thread.join()
    node_ids = list(client.store.spec(handle.id).node_ids)
    ran = [
        len(nodes_of(task_ids(w.log_text(), handle.id, "succeeded"), handle.id, node_ids))
        for w in workers
    ]
    for worker in workers:
        worker.terminate(30)
    return {
        "status": report["status"],
        "most_held": result["most"],
        "bound": args.node_threads - 1 + args.nodes_per_task,
        "nodes_run": ran,
        "wall_s": round(report["wall_s"], 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brokers", nargs="+", default=["redis", "amqp"])
    parser.add_argument("--inputs", type=int, default=128)
    parser.add_argument("--nodes-per-task", type=int, default=16)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--node-threads", type=int, default=16)
    parser.add_argument("--joiners", type=int, default=2)
    parser.add_argument("--latency-ms", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    print("| broker | run | most nodes held per worker (bound) | nodes run per worker | wall s |")
    print("|---|---|---|---|---|")
    for broker in args.brokers:
        with tempfile.TemporaryDirectory(prefix=f"bench-intake-{broker}-") as folder:
            runs(Bench(broker, Path(folder), args), broker, args)


def runs(unstarted: Bench, broker: str, args: argparse.Namespace) -> None:
    """``args.runs`` jobs on one broker's processes; a table row each."""
    with unstarted.running() as bench:
        bench.env["SWARM_NODE_THREADS"] = str(args.node_threads)
        bench.env["SWARM_NODES_PER_TASK"] = str(args.nodes_per_task)
        for i in range(args.runs):
            row = run(bench, args, f"r{i}")
            print(
                f"| {broker} | {i + 1} | {row['most_held']} ({row['bound']}) | "
                f"{row['nodes_run']} | {row['wall_s']} ({row['status']}) |",
                flush=True,
            )
            time.sleep(1)


if __name__ == "__main__":
    main()
