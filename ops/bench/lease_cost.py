"""The cost of heartbeat leases in Redis: commands per second with N nodes in flight.

Holds the leases a cluster of workers holds with ``--nodes`` nodes in flight: one call
claim per node, one task lease per message of ``--nodes-per-task`` nodes, spread over
``--processes`` worker processes (each with its own heartbeat, swarm.store.heartbeat, and its
own sweeper, swarm.jobs.takeover), at the default lease (10 s: a beat every 3.3 s, a sweep
every 2 s). Each node's call also holds its admission permits, as in a worker: one of its
model's and one of the model's backend (swarm.calls.admission.backend), the nodes spread
over the catalog's models; the same heartbeat renews them (``RedisAdmission.keep_held``:
one script per model and per backend, pipelined, per beat). Counts what Redis executed over
``--seconds`` (INFO commandstats, before and after): the calls clients sent, and the
commands the Lua scripts ran inside them. Starts a private redis-server on a free port;
prints a Markdown table.

    python ops/bench/lease_cost.py                       # 1,000 nodes, 4 processes, 30 s
    python ops/bench/lease_cost.py --nodes 10000 --processes 16
"""

from __future__ import annotations

import argparse
import contextlib
import math
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator

import redis

from swarm.calls.admission import AdmissionController, AdmissionPolicy
from swarm.calls.admission.backend import BackendAdmission
from swarm.calls.admission.redis import RedisAdmission
from swarm.calls.local.adaptive import RedisAdaptive
from swarm.catalog import Catalog, load_catalog
from swarm.jobs.takeover import sweep_every_s
from swarm.store import RedisJobStore
from swarm.store.heartbeat import LeaseKeeper
from swarm.store.leases import claim_lease, task_lease

INSIDE_SCRIPTS = (
    "get",
    "pexpire",
    "time",
    "zadd",
    "zrangebyscore",
    "hget",
    "hset",
    "hincrby",
    "zrem",
    "zcard",
    "zremrangebyscore",
    "zcount",
    "zscore",
)
"""What the lease scripts run inside Redis (every other command was sent by a client)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def commandstats(client: redis.Redis) -> dict[str, float]:
    """Calls per command, and the server's CPU seconds (``cpu``)."""
    stats = client.info("commandstats")
    calls = {name.removeprefix("cmdstat_"): float(v["calls"]) for name, v in stats.items()}
    cpu = client.info("cpu")
    calls["cpu"] = float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])
    return calls


def hold(store: RedisJobStore, keeper: LeaseKeeper, job: str, nodes: range, per_task: int) -> int:
    """Take and hold the leases of ``nodes`` as one worker process does; its task leases."""
    starts = range(nodes.start, nodes.stop, per_task)
    for start in starts:
        lease = task_lease(job, f"{job}-n{start:05d}")
        store.take_task_lease(lease, keeper.lease_s, "{}")
        keeper.hold(lease)
    for node in nodes:
        slot, owner = f"n{node:05d}", f"owner-{node}"
        assert store.claim(job, slot, owner, keeper.lease_s)
        keeper.hold(claim_lease(job, slot, owner))
    return len(starts)


def hold_permits(url: str, keeper: LeaseKeeper, catalog: Catalog, nodes: range) -> int:
    """One model permit and one backend permit per node (nodes spread over the catalog's
    models), renewed by ``keeper`` as a worker's heartbeat renews them; permits held."""
    policy = AdmissionPolicy(lease_s=keeper.lease_s)
    models = RedisAdmission(redis.Redis.from_url(url), "http://gw.bench/v1", policy)
    keeper.also(models.keep_held)
    admission: AdmissionController = BackendAdmission(
        models, catalog, RedisAdaptive(models.client, models.adaptive_key)
    )
    specs, held = list(catalog.models.values()), 0
    for node in nodes:
        spec = specs[node % len(specs)]
        decision = admission.acquire(spec, "job", 1)
        assert decision.permit is not None, decision
        held += 2 if catalog.backend_of(spec).has_limits else 1
    return held


def sweeper(store: RedisJobStore, every_s: float, stop: threading.Event) -> None:
    while not stop.wait(every_s):
        for member in store.lapsed_tasks(100):
            store.take_lapse(member)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--nodes-per-task", type=int, default=16)
    parser.add_argument("--lease-s", type=float, default=10.0)
    parser.add_argument("--seconds", type=float, default=30.0)
    args = parser.parse_args()
    with private_redis() as url:
        run(args, url)


@contextlib.contextmanager
def private_redis() -> Iterator[str]:
    """A redis-server on a free port with no persistence, answering; its URL (db 0)."""
    port = free_port()
    with tempfile.TemporaryDirectory() as data:
        server = subprocess.Popen(
            ["redis-server", "--port", str(port), "--save", "", "--dir", data],
            stdout=subprocess.DEVNULL,
        )
        try:
            url = f"redis://127.0.0.1:{port}/0"
            client = redis.Redis.from_url(url)
            for _ in range(100):
                try:
                    client.ping()
                    break
                except redis.ConnectionError:
                    time.sleep(0.05)
            client.close()
            yield url
        finally:
            server.terminate()
            server.wait(10)


def run(args: argparse.Namespace, url: str) -> None:
    client = redis.Redis.from_url(url, decode_responses=True)
    store = RedisJobStore(client, ttl_s=3600)
    share = math.ceil(args.nodes / args.processes)
    keepers, stop, tasks, permits = [], threading.Event(), 0, 0
    catalog = unlimited(load_catalog(), args.nodes)
    for p in range(args.processes):
        keeper = LeaseKeeper(store, args.lease_s)
        nodes = range(p * share, min((p + 1) * share, args.nodes))
        tasks += hold(store, keeper, "job", nodes, args.nodes_per_task)
        permits += hold_permits(url, keeper, catalog, nodes)
        keepers.append(keeper)
        every = sweep_every_s(args.lease_s)
        threading.Thread(target=sweeper, args=(store, every, stop), daemon=True).start()
    time.sleep(args.lease_s)  # every keeper beating, every sweeper sweeping
    before, started = commandstats(client), time.monotonic()
    time.sleep(args.seconds)
    after, elapsed = commandstats(client), time.monotonic() - started
    stop.set()
    for keeper in keepers:
        keeper.stop()
    lapsed = len(store.lapsed_tasks(10_000))
    delta = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    delta.pop("info", None)
    cpu_pct = 100 * delta.pop("cpu") / elapsed
    inside = sum(v for k, v in delta.items() if k in INSIDE_SCRIPTS)
    sent = sum(delta.values()) - inside
    tasks = sum(
        math.ceil(len(range(p * share, min((p + 1) * share, args.nodes))) / args.nodes_per_task)
        for p in range(args.processes)
    )
    print(
        f"| nodes in flight | processes | leases (claims + tasks) | admission permits | lease "
        f"| commands sent/s | commands run in scripts/s | Redis CPU | lapsed |\n"
        f"|---|---|---|---|---|---|---|---|---|\n"
        f"| {args.nodes:,} | {args.processes} | {args.nodes + tasks:,} ({args.nodes:,} + {tasks}) "
        f"| {permits:,} | {args.lease_s:g} s | {sent / elapsed:.1f} | {inside / elapsed:.1f} "
        f"| {cpu_pct:.2f}% | {lapsed} |"
    )
    print(
        "\nper command/s: "
        + ", ".join(f"{k} {v / elapsed:.1f}" for k, v in sorted(delta.items()) if v)
    )


def unlimited(catalog: Catalog, nodes: int) -> Catalog:
    """The catalog with room for every node in flight (the bench holds, it never waits)."""
    room = {"max_inflight": nodes + 1, "rpm": 100 * nodes, "tpm": 1_000_000 * nodes, "rps": None}
    models = {name: spec.model_copy(update=room) for name, spec in catalog.models.items()}
    return catalog.model_copy(update={"models": models})


if __name__ == "__main__":
    main()
