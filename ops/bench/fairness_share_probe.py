"""Where the 3:1 split of the fairness bench's scenario 2 goes (ops/bench/fairness.py): the
same stack and tenants (A weight 3, B weight 1, each keeping three jobs running), with a
sampler reading the model's admission keys and the broker every ``--every-ms``.

Per sample: the leases out per tenant; which tenant is under the share line (its recent
tokens over its weight the lower, as acquire.lua reads the tenants hash); the tenants
counted as waiting; each tenant's nodes sent back to the queue and not yet run again
(kombu's ``unacked`` hash: messages with a retry count, in their countdown or waiting for
their batch's other nodes). The summary gives, per tenant: its tokens per minute and calls
(the ledgers), its node requeues (distinct retried messages seen, and their nodes), the
samples with a permit unused, split by the tenant under the line and whether that tenant
had nodes in the queue meanwhile; and the model's per-tenant refusal counters when the
admission script keeps them (``refused:<tenant>:<reason>`` in the state hash).

    python ops/bench/fairness_share_probe.py                       # A short, B long, 90 s
    python ops/bench/fairness_share_probe.py --case long-short --measure-s 60
"""

from __future__ import annotations

import argparse
import base64
import json
import math
import os
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fairness

from swarm.calls.admission.limits import key_prefix
from swarm.client import SwarmClient

WEIGHTS = {"team-a": 3, "team-b": 1}
CASES = {
    "short-long": (fairness.SHORT, fairness.LONG),
    "long-short": (fairness.LONG, fairness.SHORT),
}


@dataclass(frozen=True)
class Sample:
    leases: dict[str, int]
    under: str
    """The tenant whose normalized recent use is the lower ("" when equal)."""
    waiting: frozenset[str]
    queued_nodes: dict[str, int]
    """Nodes of each tenant in retried messages not yet run again."""


@dataclass
class Probe:
    broker: redis.Redis
    store: redis.Redis
    prefix: str
    jobs: dict[str, str] = field(default_factory=dict)
    """job id -> tenant."""
    samples: list[Sample] = field(default_factory=list)
    retried: dict[tuple[str, int], tuple[str, int]] = field(default_factory=dict)
    """(task id, retries) -> (tenant, nodes) of every retried message seen."""
    recording: bool = False
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self, every_s: float) -> None:
        while not self.stop.is_set():
            sample = self._sample()
            if self.recording:
                self.samples.append(sample)
            time.sleep(every_s)

    def _tenant_of(self, text: str) -> str:
        return next((t for job, t in self.jobs.items() if job in text), "")

    def _queued(self) -> dict[str, int]:
        queued: Counter[str] = Counter()
        for raw in self.broker.hvals("unacked"):
            message = json.loads(raw)[0]
            headers = message.get("headers", {})
            retries = int(headers.get("retries") or 0)
            if retries == 0 or headers.get("task", "").endswith("aggregate"):
                continue
            body = base64.b64decode(message["body"]).decode("utf-8", "replace")
            args = json.loads(body)[0]
            tenant = self._tenant_of(str(args[0]))
            nodes = len(args[1]) if isinstance(args[1], list) else 1
            queued[tenant] += nodes
            if self.recording:
                self.retried[(headers.get("id", ""), retries)] = (tenant, nodes)
        return dict(queued)

    def _sample(self) -> Sample:
        p = self.prefix
        leases: Counter[str] = Counter()
        for key, count in self.store.hgetall(f"{p}:jobs").items():
            leases[key.decode().partition("\t")[0]] += int(count)
        now_s, now_us = self.store.time()
        now_ms = now_s * 1000 + now_us / 1000
        norm = {}
        for name, value in self.store.hgetall(f"{p}:tenants").items():
            use, at, weight, *_ = (float(x) for x in value.decode().split())
            norm[name.decode()] = use * math.exp(-max(now_ms - at, 0) / 60_000) / weight
        a, b = norm.get("team-a", 0.0), norm.get("team-b", 0.0)
        under = "team-a" if a < b else "team-b" if b < a else ""
        waiting = frozenset(k.decode().partition("\t")[0]
                            for k in self.store.zrange(f"{p}:wjobs", 0, -1))  # fmt: skip
        return Sample(dict(leases), under, waiting, self._queued())


def report(probe: Probe, a: fairness.Tenant, b: fairness.Tenant, minutes: float,
           before: dict[str, tuple[int, int, int]]) -> None:  # fmt: skip
    samples = probe.samples
    n = len(samples)
    print(f"samples {n} over {minutes * 60:.0f} s")
    for tenant in (a, b):
        now = ledger_totals(tenant)
        calls, prompt, completion = (x - x0 for x, x0 in zip(now, before[tenant.name], strict=True))
        requeues = [nodes for t, nodes in probe.retried.values() if t == tenant.name]
        held = sum(s.leases.get(tenant.name, 0) for s in samples) / max(n, 1)
        print(f"{tenant.name}: {(prompt + completion) / minutes:,.0f} tokens/min, {calls} calls "
              f"({prompt / max(calls, 1):.0f} prompt + {completion / max(calls, 1):.0f} "
              f"completion per call); requeued messages {len(requeues)} ({sum(requeues)} "
              f"nodes); leases held on average {held:.2f}")  # fmt: skip
    full = sum(1 for s in samples if sum(s.leases.values()) >= fairness.MAX_INFLIGHT)
    both = sum(1 for s in samples if {"team-a", "team-b"} <= s.waiting)
    print(
        f"model full in {full}/{n} samples; both tenants waiting in {both}/{n}; "
        f"leases out on average {sum(sum(s.leases.values()) for s in samples) / max(n, 1):.2f}"
    )
    for name in ("team-a", "team-b"):
        mine = [s for s in samples if s.under == name]
        idle = [s for s in mine if sum(s.leases.values()) < fairness.MAX_INFLIGHT]
        idle_q = [s for s in idle if s.queued_nodes.get(name, 0) > 0]
        free = sum(fairness.MAX_INFLIGHT - sum(s.leases.values()) for s in idle)
        queued = sum(s.queued_nodes.get(name, 0) for s in mine) / max(len(mine), 1)
        print(f"{name} under the line in {len(mine)}/{n} samples: a permit unused in "
              f"{len(idle)} ({free / max(len(mine), 1):.2f} unused on average), {len(idle_q)} of "
              f"them with its nodes sent back to the queue; its nodes in the queue "
              f"{queued:.1f} on average")  # fmt: skip
    refused = {k.decode(): int(v) for k, v in probe.store.hgetall(f"{probe.prefix}:state").items()
               if k.startswith(b"refused:")}  # fmt: skip
    if refused:
        print("refusals by tenant and reason (whole run):", dict(sorted(refused.items())))


def ledger_totals(tenant: fairness.Tenant) -> tuple[int, int, int]:
    calls = prompt = completion = 0
    for job in tenant.jobs:
        for line in tenant.client.store.ledger(job.id).values():
            calls += line.calls
            prompt += line.usage.prompt_tokens
            completion += line.usage.completion_tokens
    return calls, prompt, completion


def run(folder: Path, case: str, warmup_s: float, measure_s: float, every_s: float) -> None:
    a_answer, b_answer = CASES[case]
    with fairness.stack(folder, WEIGHTS) as st:
        client: SwarmClient = st.client
        settings = client.settings
        probe = Probe(redis.Redis.from_url(str(settings.broker_url)),
                      redis.Redis.from_url(str(settings.backend_url())),
                      key_prefix(str(settings.base_url), fairness.MODEL))  # fmt: skip
        a = fairness.Tenant(client, "team-a", a_answer)
        b = fairness.Tenant(client, "team-b", b_answer)
        thread = threading.Thread(target=probe.run, args=(every_s,), daemon=True)
        thread.start()

        def run_for(seconds: float, ramp_s: float = 0.0) -> None:
            start = time.monotonic()
            while (now := time.monotonic()) < start + seconds:
                jobs = fairness.JOBS_PER_TENANT if ramp_s <= 0 else 1 + int((now - start) / ramp_s)
                for tenant in (a, b):
                    tenant.keep_busy(min(jobs, fairness.JOBS_PER_TENANT))
                    probe.jobs.update((job.id, tenant.name) for job in tenant.jobs)
                time.sleep(0.2)

        run_for(warmup_s, ramp_s=warmup_s / fairness.JOBS_PER_TENANT)
        before = {t.name: ledger_totals(t) for t in (a, b)}
        start = time.monotonic()
        probe.recording = True
        run_for(measure_s)
        probe.recording = False
        minutes = (time.monotonic() - start) / 60
        probe.stop.set()
        thread.join()
        report(probe, a, b, minutes, before)
        for job in a.jobs + b.jobs:
            job.cancel()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", choices=sorted(CASES), default="short-long")
    parser.add_argument("--warmup-s", type=float, default=20.0)
    parser.add_argument("--measure-s", type=float, default=90.0)
    parser.add_argument("--every-ms", type=float, default=50.0)
    args = parser.parse_args()
    print(f"case {args.case}; load average {os.getloadavg()[0]:.1f} at the start", flush=True)
    with tempfile.TemporaryDirectory(prefix="fairness-share-probe-") as tmp:
        run(Path(tmp), args.case, args.warmup_s, args.measure_s, args.every_ms / 1000)
    print(f"load average {os.getloadavg()[0]:.1f} at the end", flush=True)


if __name__ == "__main__":
    main()
