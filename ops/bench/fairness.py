"""The fairness bench: tenants sharing one saturated model, on a private Redis, `swarm sim`
in generation mode and 2 workers (threads pool, ``-c 40``, 512 node threads).

The model (kimi-k2.5, the catalog's default and aggregate) is held by its ``max_inflight``
(8) far below the workers' threads; its rate limits are far above the load. The simulator
answers in ``TTFT_MS`` plus the answer's length at ``TOKENS_PER_S`` (the length asked by
``[[sim:answer_tokens=N]]`` in each input), so a long answer holds its slot longer.

1. small beside large: tenant B's 100-input job alone, then the same job submitted while
   tenant A's 10,000-input job has run ``--warmup-s``; B's time (submit to report) beside A
   over its time alone (target <= 1.5), and where it went (``Timeline``: B's first node
   received by a worker, all received, all ended, the report). A is cancelled afterwards.
2. weights 3:1: tenants A (weight 3) and B (weight 1) each keep three jobs running (200
   inputs with short answers, 60 with long ones; a new job when one ends); after
   ``--warmup-s`` their billed tokens (the job ledgers) over ``--measure-s`` (180 s) give
   tokens per minute; A's over B's (target 3 +- 10%), once with A's answers short and B's
   long, once the reverse.

    python ops/bench/fairness.py                   # both scenarios
    python ops/bench/fairness.py --only 2 --measure-s 30
    python ops/bench/fairness.py --only 1 --out /tmp/fairness-runs.md --label main

Each run appends its section (time, label, command, load at the start and the end) to
``--out`` (ops/bench/results/fairness-runs.md by default): past runs are kept.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from swarm.bench import procs
from swarm.bench.sweep import swarm_env
from swarm.client import SwarmClient, SwarmHandle
from swarm.records import InputItem
from swarm.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "ops" / "bench" / "results" / "fairness-runs.md"
"""Where runs append their sections unless ``--out`` names another file."""
MODEL = "kimi-k2.5"
QUEUE = f"llm.{MODEL}"
MAX_INFLIGHT = 8
MEASURE_S = 180.0
"""Scenario 2's measured span: three time constants of the share rule's memory (the
admission tenant window, 60 s) and several of B's jobs, each of whose aggregations
carries about as many tokens as its nodes (a lump of ~18,000 at 300-token answers): one
such lump more or fewer in a 60 s span moved B's tokens per minute by about a quarter."""
TTFT_MS, TOKENS_PER_S = 100, 400
SHORT, LONG = 20, 300
"""Answer lengths (completion tokens) of the short and the long answers."""
JOB_INPUTS = 100
JOBS_PER_TENANT = 3
JOB_INPUTS_BY_ANSWER = {SHORT: 200, LONG: 60}
"""Scenario 2: each tenant keeps 3 jobs running, of 200 inputs with short answers and of 60
with long ones (so either stays backlogged between its jobs): 69 task messages in all, under
the workers' 80 threads, and node threads for all their nodes: every tenant's calls reach
admission, none queues behind the other's tasks at the broker or in a node pool."""
THREADS, NODE_THREADS = 40, 512
TIMEOUT_S = 900.0
AGGREGATE = f"Combine the summaries [[sim:answer_tokens={SHORT}]]"
"""A short aggregation: a tenant's next job is not held up by a long one."""


def catalog(path: Path, weights: dict[str, int]) -> Path:
    """The packaged catalog: kimi-k2.5 held by its in-flight limit, other limits far off."""
    text = resources.files("swarm.data").joinpath("catalog.toml").read_text("utf-8")
    text = re.sub(r"(?m)^(rpm|rps|tpm|max_inflight) = .*$", r"\1 = 10_000_000", text)
    head, sep, rest = text.partition(f'[models."{MODEL}"]')
    rest = rest.replace("max_inflight = 10_000_000", f"max_inflight = {MAX_INFLIGHT}", 1)
    tenants = "".join(f"{name} = {w}\n" for name, w in weights.items())
    path.write_text(head + sep + rest + ("\n[tenants]\n" + tenants if tenants else ""), "utf-8")
    return path


@dataclass
class Stack:
    client: SwarmClient


@contextmanager
def stack(folder: Path, weights: dict[str, int]) -> Iterator[Stack]:
    """Fresh Redis, simulator and workers; a client on them."""
    folder.mkdir(parents=True, exist_ok=True)
    path = catalog(folder / "catalog.toml", weights)
    sim_args = ["--ttft-ms", str(TTFT_MS), "--tokens-per-s", str(TOKENS_PER_S)]
    with procs.redis_server(folder) as url, procs.sim(folder, sim_args) as sim:
        env = {**os.environ, **swarm_env(url, sim.base_url, path, THREADS)}
        env["SWARM_NODE_THREADS"] = str(NODE_THREADS)
        with procs.workers(folder, env, 2, THREADS, QUEUE):
            settings = Settings(broker_url=url, base_url=sim.base_url, api_key="sk-bench",  # type: ignore[arg-type]
                                config=path)  # fmt: skip
            yield Stack(SwarmClient.from_settings(settings))


def items(n: int, answer_tokens: int, tag: str) -> list[InputItem]:
    marker = f"[[sim:answer_tokens={answer_tokens}]]"
    return [InputItem(ref=f"{tag}-{i}", text=f"{tag} input {i} {marker}") for i in range(n)]


def tokens(client: SwarmClient, handle: SwarmHandle) -> int:
    return sum(line.usage.total_tokens for line in client.store.ledger(handle.id).values())


@dataclass(frozen=True)
class Timeline:
    """Where a job's time went, seconds from its submit (sampled every POLL_S)."""

    first: float
    """Its first node received by a worker (the queue wait)."""
    received: float
    """Every node received (in flight or ended: the intake)."""
    nodes: float
    """Every node ended (the calls)."""
    report: float
    """The report written (the aggregation)."""

    def cells(self) -> str:
        return f"{self.first:.1f} | {self.received:.1f} | {self.nodes:.1f} | {self.report:.1f}"


POLL_S = 0.1


def timed(client: SwarmClient, tenant: str) -> Timeline:
    """Tenant's 100-input job (short answers) from submit to report, sampled as it runs."""
    start = time.monotonic()
    handle = client.submit(items(JOB_INPUTS, SHORT, tenant), "Summarise", tenant=tenant)
    marks: dict[str, float] = {}
    while True:
        progress = handle.progress()
        now = time.monotonic() - start
        if progress.ended + progress.in_flight > 0:
            marks.setdefault("first", now)
        if progress.ended + progress.in_flight >= progress.nodes_total:
            marks.setdefault("received", now)
        if progress.ended >= progress.nodes_total:
            marks.setdefault("nodes", now)
        if progress.finished or now > TIMEOUT_S:
            break
        time.sleep(POLL_S)
    report = handle.wait(timeout=TIMEOUT_S)
    assert report.status == "succeeded", report.status
    end = time.monotonic() - start
    return Timeline(*(marks.get(k, end) for k in ("first", "received", "nodes")), end)


def small_beside_large(folder: Path, warmup_s: float) -> list[str]:
    with stack(folder / "alone", {}) as st:
        alone = timed(st.client, "team-b")
    with stack(folder / "beside", {}) as st:
        big = st.client.submit(items(10_000, SHORT, "team-a"), "Summarise", tenant="team-a")
        time.sleep(warmup_s)
        done_before = big.progress().done
        beside = timed(st.client, "team-b")
        done_during = big.progress().done - done_before
        big.cancel()
    ratio = beside.report / alone.report
    verdict = "meets" if ratio <= 1.5 else "misses"
    return [
        "| B's 100-input job | time (s) | A's nodes done meanwhile | first node received | "
        "all received | all ended | report |",
        "|---|---:|---:|---:|---:|---:|---:|",
        f"| alone | {alone.report:.1f} | - | {alone.cells()} |",
        f"| beside A's 10,000-input job (after {warmup_s:.0f} s) | {beside.report:.1f} | "
        f"{done_during} | {beside.cells()} |",
        "",
        f"beside / alone = {ratio:.2f} ({verdict} <= 1.5)",
    ]


class Tenant:
    """A tenant keeping JOBS_PER_TENANT jobs running; its billed tokens over all its jobs."""

    def __init__(self, client: SwarmClient, name: str, answer_tokens: int) -> None:
        self.client, self.name, self.answer_tokens = client, name, answer_tokens
        self.jobs: list[SwarmHandle] = []
        self.submitted = 0

    def keep_busy(self, jobs: int = JOBS_PER_TENANT) -> None:
        """Submit jobs until ``jobs`` run (started one at a time, they end apart)."""
        running = [job for job in self.jobs if not job.done()]
        for _ in range(jobs - len(running)):
            self.submitted += 1
            tag = f"{self.name}-{self.submitted}"
            batch = items(JOB_INPUTS_BY_ANSWER[self.answer_tokens], self.answer_tokens, tag)
            options = {"aggregate_instruction": AGGREGATE, "tenant": self.name}
            self.jobs.append(self.client.submit(batch, "Summarise", **options))

    def billed(self) -> int:
        return sum(tokens(self.client, job) for job in self.jobs)


def weighted(folder: Path, a_answer: int, b_answer: int, warmup_s: float,
             measure_s: float) -> tuple[float, float]:  # fmt: skip
    """Tokens per minute of A (weight 3) and B (weight 1) while both stay busy."""
    with stack(folder, {"team-a": 3, "team-b": 1}) as st:
        a, b = Tenant(st.client, "team-a", a_answer), Tenant(st.client, "team-b", b_answer)

        def run_for(seconds: float, ramp_s: float = 0.0) -> None:
            start = time.monotonic()
            while (now := time.monotonic()) < start + seconds:
                jobs = JOBS_PER_TENANT if ramp_s <= 0 else 1 + int((now - start) / ramp_s)
                a.keep_busy(min(jobs, JOBS_PER_TENANT))
                b.keep_busy(min(jobs, JOBS_PER_TENANT))
                time.sleep(0.2)

        run_for(warmup_s, ramp_s=warmup_s / JOBS_PER_TENANT)
        start, a0, b0 = time.monotonic(), a.billed(), b.billed()
        run_for(measure_s)
        minutes, a1, b1 = (time.monotonic() - start) / 60, a.billed(), b.billed()
        for job in a.jobs + b.jobs:
            job.cancel()
    return (a1 - a0) / minutes, (b1 - b0) / minutes


def weights_3_to_1(folder: Path, warmup_s: float, measure_s: float) -> list[str]:
    lines = [
        "| A's answers | B's answers | A tokens/min | B tokens/min | A / B | within 10% of 3 |",
        "|---|---|---:|---:|---:|---|",
    ]
    for a_answer, b_answer in ((SHORT, LONG), (LONG, SHORT)):
        a, b = weighted(folder / f"{a_answer}-{b_answer}", a_answer, b_answer, warmup_s, measure_s)
        ratio = a / b
        ok = "yes" if abs(ratio - 3) <= 0.3 else "no"
        cells = f"{a_answer} tokens | {b_answer} tokens | {a:,.0f} | {b:,.0f} | {ratio:.2f} | {ok}"
        lines.append(f"| {cells} |")
        print(lines[-1], flush=True)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=["1", "2"], default=None)
    parser.add_argument("--warmup-s", type=float, default=20.0)
    parser.add_argument(
        "--measure-s", type=float, default=MEASURE_S, help="scenario 2's measured span"
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="file the run appends to")
    parser.add_argument("--label", default="", help="names the code measured (main, branch)")
    args = parser.parse_args()
    command = "python ops/bench/fairness.py " + " ".join(sys.argv[1:])
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    load_start = os.getloadavg()[0]
    title = f"## Run {started}" + (f" ({args.label})" if args.label else "")
    out = [title, "", f"`{command.strip()}`"]
    with tempfile.TemporaryDirectory(prefix="fairness-") as tmp:
        folder = Path(tmp)
        if args.only in (None, "1"):
            out += ["", "### 1. A small job beside a large one (equal weights)", ""]
            out += small_beside_large(folder / "one", args.warmup_s)
            print("\n".join(out), flush=True)
        if args.only in (None, "2"):
            out += ["", "### 2. Weights 3:1 on a saturated model", ""]
            out += weights_3_to_1(folder / "two", args.warmup_s, args.measure_s)
    load = os.getloadavg()[0]
    out += [
        "",
        f"2 cores, load average {load_start:.1f} at the start, {load:.1f} at the end; model "
        f"{MODEL} held at "
        f"max_inflight {MAX_INFLIGHT}; sim {TTFT_MS} ms to first token, {TOKENS_PER_S} "
        f"tokens/s; answers {SHORT} (short) and {LONG} (long) tokens; 2 workers -c {THREADS}, "
        f"{NODE_THREADS} node threads.",
    ]
    text = "\n".join(out) + "\n"
    print(text)
    with args.out.open("a", encoding="utf-8") as results:
        results.write(("\n" if results.tell() else "") + text)


if __name__ == "__main__":
    main()
