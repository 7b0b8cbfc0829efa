"""What reading requests past their deadline costs a call (swarm.calls.local.overtime): the
transport step (pacing, the request, its answer parsed) against `swarm sim --latency-ms 0`,
with overtime off (SWARM_ABANDONED_GRACE_S=0: the request on the node's thread, as before)
and on (the default: handed to an overtime thread), side by side in one run.

    python ops/bench/overtime.py                       # 8 rounds x 250 calls per arm
    python ops/bench/overtime.py --rounds 12 --calls 500 --threads 8

Rounds alternate the arms (off, on, on, off, ...) so drift in the machine's load falls on
both. Each round's wall and CPU time (this process only: the simulator is another process)
per call; prints the median over rounds of each arm and their difference. The hand-off
alone (a request that returns at once, through ``Overtime.send`` or called directly) is
measured the same way: on a loaded machine it is the steadier figure.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

from swarm.bench import procs
from swarm.calls import steps
from swarm.calls.gateway import make_client
from swarm.calls.idempotency import CallGuard
from swarm.calls.local.overtime import Overtime
from swarm.calls.pipeline import gate_for
from swarm.calls.request import Answer, CallRequest
from swarm.calls.runtime import Runtime
from swarm.catalog import load_catalog
from swarm.records import Usage
from swarm.settings import Settings
from swarm.store import MemoryJobStore

MODEL = "kimi-k2.5"


def transport_of(rt: Runtime) -> tuple[steps.Attempt, CallRequest]:
    """The transport step of one call of ``rt`` and its request."""
    request = CallRequest.of("j", "n", rt.catalog.model(MODEL), [{"role": "user", "content": "hi"}],
                             64)  # fmt: skip
    ctx = steps.CallContext(rt, CallGuard(rt, request), gate_for(rt, request))
    return steps.transport(ctx), request


def one_round(rt: Runtime, calls: int, threads: int) -> tuple[float, float]:
    """Wall and CPU microseconds per call of ``calls`` calls on each of ``threads`` threads."""
    http, request = transport_of(rt)

    def run() -> None:
        for _ in range(calls):
            http(request)

    workers = [threading.Thread(target=run) for _ in range(threads)]
    wall, cpu = time.perf_counter(), time.process_time()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    total = calls * threads
    return ((time.perf_counter() - wall) / total * 1e6, (time.process_time() - cpu) / total * 1e6)


def hand_off_us(rounds: int, calls: int) -> tuple[float, float]:
    """CPU microseconds per call of a no-op request called directly and through overtime
    (median of rounds)."""
    overtime = Overtime(135.0, 64)
    answer = Answer("", Usage(), None)

    def request(read_timeout_s: float | None) -> Answer:
        return answer

    def late(outcome: object, latency_s: float) -> None:
        return None

    direct: list[float] = []
    handed: list[float] = []
    for _ in range(rounds):
        started = time.process_time()
        for _ in range(calls):
            request(None)
        direct.append((time.process_time() - started) / calls * 1e6)
        started = time.process_time()
        for _ in range(calls):
            overtime.send(request, 45.0, late)
        handed.append((time.process_time() - started) / calls * 1e6)
    return statistics.median(direct), statistics.median(handed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--calls", type=int, default=250)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, procs.sim(Path(tmp), ["--latency-ms", "0"]) as sim:
        settings = Settings(base_url=sim.base_url, api_key="sim")  # type: ignore[arg-type]
        base = Runtime(settings, load_catalog(), MemoryJobStore(),
                       make_client(settings, sim.base_url, "sim"))  # fmt: skip
        arms = {
            "off": replace(base, overtime=Overtime(0.0, 0)),
            "on": replace(base, overtime=Overtime.from_settings(settings)),
        }
        for rt in arms.values():
            one_round(rt, 50, args.threads)  # warm up: connections, threads
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in arms}
        for index in range(args.rounds):
            order = ("off", "on") if index % 2 == 0 else ("on", "off")
            for name in order:
                results[name].append(one_round(arms[name], args.calls, args.threads))
    print(f"transport, {args.threads} thread(s), {args.rounds} rounds x {args.calls} calls "
          f"per thread per arm (median of rounds, us per call)")  # fmt: skip
    medians = {}
    for name, rounds in results.items():
        wall = statistics.median(r[0] for r in rounds)
        cpu = statistics.median(r[1] for r in rounds)
        medians[name] = (wall, cpu)
        print(f"  overtime {name:<3}  wall {wall:7.1f}  cpu {cpu:7.1f}   "
              f"rounds wall {[round(r[0]) for r in rounds]}")  # fmt: skip
    (off_wall, off_cpu), (on_wall, on_cpu) = medians["off"], medians["on"]
    print(f"  added: wall {on_wall - off_wall:+.1f} us, cpu {on_cpu - off_cpu:+.1f} us per call")
    direct, handed = hand_off_us(args.rounds, 20 * args.calls)
    print(f"hand-off alone: {handed - direct:.1f} us of CPU per call (direct {direct:.2f} us, "
          f"through overtime {handed:.1f} us)")  # fmt: skip


if __name__ == "__main__":
    main()
