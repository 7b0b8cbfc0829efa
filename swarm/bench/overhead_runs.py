"""The scenarios of `swarm bench overhead` (see swarm.bench.overhead for what each measures)."""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

from swarm.bench import procs
from swarm.bench.overhead import (
    AGGREGATE_1S,
    HEDGE_ENV,
    P50_S,
    SEED_000,
    Bench,
    Row,
    measure,
    median_text,
    rss_mb,
    texts,
)

Run = Callable[[list[str], str], float]
Client = Callable[[procs.Sim], AbstractContextManager[Run]]


def _clients(b: Bench, hedged: bool = False) -> Iterator[tuple[str, Client]]:
    yield "plain celery", b.plain
    yield "swarm", b.swarm
    if hedged:
        yield "swarm + hedging", lambda sim: b.swarm(sim, HEDGE_ENV)


def critical_path(b: Bench) -> list[Row]:
    """(a) 100 nodes at 1.0 s plus a 1.0 s aggregation: wall / 2.0 s."""
    rows = []
    with procs.sim(b.folder, ["--latency-ms", "1000"]) as sim:
        for name, client in _clients(b):
            with client(sim) as run:
                walls, _ = measure(run, sim, 100, AGGREGATE_1S, b.repeat)
            ratio = statistics.median(walls) / 2.0
            label = "a 100 x 1.0 s + 1.0 s agg"
            rows.append(Row(label, name, ratio, "x ideal", median_text(walls)))
    return rows


def tail(b: Bench, hang_rate: float = 0.0) -> list[Row]:
    """(b) 100 nodes under seed 000's latency plus a 1.0 s aggregation (``hang_rate``:
    that share of requests never answers): (wall - 1.0 s) / p50, and extra calls."""
    label = "b 100 x seed 000" + (f" + {hang_rate:.0%} hung" if hang_rate else "")
    args = [*SEED_000, *(["--hang-rate", str(hang_rate)] if hang_rate else [])]
    rows = []
    for name, client in _clients(b, hedged=True):
        if hang_rate and name == "plain celery":
            continue  # a hung plain task fails its chord: nothing to compare
        # A fresh simulator per client with the same seed: every client draws the same
        # latencies. Sharing one, each client drew another part of the random stream, and
        # the maximum of 100 draws (which sets the wall) differed by up to a second.
        with procs.sim(b.folder, args) as sim, client(sim) as run:
            walls, extra = measure(run, sim, 100, AGGREGATE_1S, b.repeat)
            ratio = (statistics.median(walls) - 1.0) / P50_S
            detail = f"{median_text(walls)}; extra calls {extra}"
            rows.append(Row(label, name, ratio, "x p50 + agg", detail))
    return rows


def throughput(b: Bench, n: int = 2000) -> list[Row]:
    """(c) ``n`` nodes at 0 ms: sub-agent calls per second, submit to final result."""
    rows = []
    with procs.sim(b.folder, []) as sim:
        for name, client in _clients(b):
            with client(sim) as run:
                run(texts(200, "warm-up"), "Merge.")
                walls = [run(texts(n, f"c{i}-{time.time_ns()}"), "Merge.") for i in range(2)]
            rate = n / statistics.median(walls)
            rows.append(Row(f"c {n} x 0 ms", name, rate, "calls/s", median_text(walls)))
    return rows


def memory(b: Bench, inflight: int = 100) -> list[Row]:
    """(d) one worker -c ``inflight`` holding ``inflight`` calls of 3 s: peak RSS."""
    rows = []
    with procs.sim(b.folder, ["--latency-ms", "3000"]) as sim:
        for name, client in (("plain celery", b.plain), ("swarm", b.swarm)):
            with client(sim, count=1, c=inflight) as run:
                run(texts(10, "warm-up"), "Merge.")
                idle = rss_mb(b.pids[0])
                peak = _peak_rss(b.pids[0], lambda: run(texts(inflight, "rss"), "Merge."))
            detail = f"idle {idle:.0f} MB, peak {peak:.0f} MB with {inflight} calls in flight"
            rows.append(Row(f"d RSS, {inflight} in flight", name, peak, "MB", detail))
    return rows


def _peak_rss(pid: int, job: Callable[[], float]) -> float:
    peak = 0.0
    done = threading.Event()

    def background() -> None:
        try:
            job()
        finally:
            done.set()

    worker = threading.Thread(target=background)
    worker.start()
    while not done.wait(0.1):
        peak = max(peak, rss_mb(pid))
    worker.join()
    return peak


SCENARIOS: dict[str, Callable[[Bench], list[Row]]] = {
    "a": critical_path,
    "b": tail,
    "b'": lambda b: tail(b, hang_rate=0.02),
    "c": throughput,
    "d": memory,
}
