"""Where tenant B's time goes in the fairness bench's scenario 1 (ops/bench/fairness.py):
the same stacks, with a sampler reading the broker and the model's admission keys every
``--every-ms`` while B's 100-input job runs, alone and beside A's 10,000-input job.

Per sample: B's messages in the broker's list of priority 0 (jobs up to 100 nodes), A's in
the others; B's and A's messages the workers hold (kombu's ``unacked`` hash: reserved,
running or waiting for their countdown); the leases out by tenant; the model's waiters;
whether B's job counts as waiting; B's nodes done. The summary
says when B's first call was admitted, its admissions per second, and in how many samples
B had nodes waiting while a permit was unused.

    python ops/bench/fairness_probe.py                 # alone, then beside A
    python ops/bench/fairness_probe.py --only beside --timeline
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fairness

from swarm.calls.admission.limits import key_prefix
from swarm.client import SwarmClient

PRIORITY_SEP = "\x06\x16"


@dataclass(frozen=True)
class Sample:
    t_s: float
    b_queued: int
    a_queued: int
    b_held: int
    a_held: int
    a_leases: int
    b_leases: int
    waiters: int
    b_waiting: bool
    b_done: int


@dataclass
class Probe:
    url: str
    tenant: str
    every_s: float
    samples: list[Sample] = field(default_factory=list)
    job: str = ""
    start: float = 0.0
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self, client: SwarmClient) -> None:
        r = redis.Redis.from_url(self.url)
        settings = client.settings
        store = redis.Redis.from_url(str(settings.backend_url()))
        prefix = key_prefix(str(settings.base_url), fairness.MODEL)
        while not self.stop.is_set():
            self.samples.append(self._sample(r, store, client, prefix))
            time.sleep(self.every_s)

    def _sample(
        self, r: redis.Redis, store: redis.Redis, client: SwarmClient, prefix: str
    ) -> Sample:
        job = self.job
        b_queued = int(r.llen(fairness.QUEUE))  # priority 0: jobs of up to 100 nodes (B's)
        a_queued = sum(int(r.llen(f"{fairness.QUEUE}{PRIORITY_SEP}{p}")) for p in (3, 6, 9))
        b_held = a_held = 0
        for raw in r.hvals("unacked"):
            if job and job.encode() in raw:
                b_held += 1
            else:
                a_held += 1
        leases = {k.decode(): int(v) for k, v in store.hgetall(f"{prefix}:jobs").items()}
        b_leases = sum(v for k, v in leases.items() if k.startswith(self.tenant + "\t"))
        waiting = [k.decode() for k in store.zrange(f"{prefix}:wjobs", 0, -1)]
        done = client.store.progress(job).done if job else 0
        return Sample(
            t_s=time.monotonic() - self.start,
            b_queued=b_queued,
            a_queued=a_queued,
            b_held=b_held,
            a_held=a_held,
            a_leases=sum(leases.values()) - b_leases,
            b_leases=b_leases,
            waiters=int(store.zcard(f"{prefix}:waiters")),
            b_waiting=any(k.startswith(self.tenant + "\t") for k in waiting),
            b_done=done,
        )


def probed(client: SwarmClient, url: str, every_s: float) -> tuple[float, list[Sample]]:
    probe = Probe(url, "team-b", every_s)
    thread = threading.Thread(target=probe.run, args=(client,), daemon=True)
    probe.start = time.monotonic()
    handle = client.submit(fairness.items(fairness.JOB_INPUTS, fairness.SHORT, "team-b"),
                           "Summarise", tenant="team-b")  # fmt: skip
    probe.job = handle.id
    thread.start()
    report = handle.wait(timeout=fairness.TIMEOUT_S)
    took = time.monotonic() - probe.start
    probe.stop.set()
    thread.join()
    assert report.status == "succeeded", report.status
    return took, probe.samples


def summary(name: str, took: float, samples: list[Sample], timeline: bool) -> None:
    first = next((s.t_s for s in samples if s.b_leases or s.b_done), float("nan"))
    done_at = next((s.t_s for s in samples if s.b_done >= fairness.JOB_INPUTS), took)
    b_wait = [s for s in samples if s.b_waiting or s.b_queued or s.b_held]
    unused = [s for s in b_wait if s.a_leases + s.b_leases < fairness.MAX_INFLIGHT]
    a_in = [s for s in samples if s.b_waiting and s.a_leases > 0]
    rate = fairness.JOB_INPUTS / max(done_at - first, 1e-9)
    print(f"## {name}: {took:.1f} s; first B lease {first:.2f} s; B done at {done_at:.2f} s "
          f"({rate:.1f} nodes/s after the first); samples {len(samples)}; B waiting/queued with "
          f"a permit unused {len(unused)}/{len(b_wait)}; B waiting while A holds leases "
          f"{len(a_in)}", flush=True)  # fmt: skip
    if timeline:
        print("t_s b_queued b_held a_queued a_held a_leases b_leases waiters b_waiting b_done")
        for s in samples:
            print(f"{s.t_s:.2f} {s.b_queued} {s.b_held} {s.a_queued} {s.a_held} {s.a_leases} "
                  f"{s.b_leases} {s.waiters} {int(s.b_waiting)} {s.b_done}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=["alone", "beside"], default=None)
    parser.add_argument("--warmup-s", type=float, default=20.0)
    parser.add_argument("--every-ms", type=float, default=50.0)
    parser.add_argument("--timeline", action="store_true")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} at the start", flush=True)
    with tempfile.TemporaryDirectory(prefix="fairness-probe-") as tmp:
        folder = Path(tmp)
        if args.only in (None, "alone"):
            with fairness.stack(folder / "alone", {}) as st:
                url = str(st.client.settings.broker_url)
                took, samples = probed(st.client, url, args.every_ms / 1000)
            summary("alone", took, samples, args.timeline)
        if args.only in (None, "beside"):
            with fairness.stack(folder / "beside", {}) as st:
                url = str(st.client.settings.broker_url)
                big = st.client.submit(fairness.items(10_000, fairness.SHORT, "team-a"),
                                       "Summarise", tenant="team-a")  # fmt: skip
                time.sleep(args.warmup_s)
                took, samples = probed(st.client, url, args.every_ms / 1000)
                big.cancel()
            summary("beside A", took, samples, args.timeline)
    print(f"load average {os.getloadavg()[0]:.1f} at the end", flush=True)


if __name__ == "__main__":
    main()
