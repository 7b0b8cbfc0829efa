"""A model of the tenant share rule alone (no Redis, no workers, no requeues): two tenants at
weights 3:1, each keeping three jobs on a model of 8 permits, every caller always asking.
A job is ``n`` node calls (a 60-token prompt, the tenant's answer length, 100 ms + the
answer at 400 tokens/s) then one aggregation whose prompt holds every answer, as in
``ops/bench/fairness.py``'s scenario 2. Recent use decays over 60 s.

Rules compared:

- ``line``: a call is admitted when its tenant's normalized use is not above the other's
  (main before issue 26's fix: an aggregation goes at the line and ends its full size above);
- ``half``: a call stands at its tenant's normalized use plus half its charge, and a refused
  call holds its tenant's place at half its size (swarm.calls.admission.shares.standing).

    python ops/bench/share_line_sim.py      # A / B tokens over 15 simulated minutes
"""

from __future__ import annotations

import heapq
import math
import random
from dataclasses import dataclass, field

WINDOW_S = 60.0
PERMITS = 8
WEIGHTS = {"A": 3.0, "B": 1.0}
PROMPT = 60
NODES = {20: 200, 300: 60}
"""Nodes per job by answer length (the bench's jobs)."""


@dataclass
class Job:
    left: int
    """Node calls not admitted yet."""
    running: int = 0
    aggregating: bool = False


@dataclass
class Model:
    rule: str
    answers: dict[str, int]
    use: dict[str, float] = field(default_factory=lambda: {"A": 0.0, "B": 0.0})
    hold: dict[str, float] = field(default_factory=lambda: {"A": 0.0, "B": 0.0})
    at: float = 0.0

    def decay(self, now: float) -> None:
        keep = math.exp(-(now - self.at) / WINDOW_S)
        self.use = {t: u * keep for t, u in self.use.items()}
        self.at = now

    def admits(self, tenant: str, cost: float) -> bool:
        other = "B" if tenant == "A" else "A"
        mine, theirs = self.use[tenant] / WEIGHTS[tenant], self.use[other] / WEIGHTS[other]
        if self.rule == "line":
            return mine <= theirs
        shift = cost / (2 * WEIGHTS[tenant])
        if mine + max(shift, self.hold[tenant]) <= theirs + self.hold[other]:
            if shift >= self.hold[tenant]:
                self.hold[tenant] = 0.0
            return True
        self.hold[tenant] = max(self.hold[tenant], shift)
        return False


def calls(tenant: str, jobs: list[Job], answer: int) -> list[tuple[Job, int, int, float]]:
    """(job, prompt, completion, seconds) of every call the tenant could send now."""
    out = [(job, PROMPT, answer, 0.1 + answer / 400) for job in jobs if job.left]
    for job in jobs:
        if not job.left and not job.running and not job.aggregating:
            prompt = NODES[answer] * answer
            out.append((job, prompt, 20, 0.15 + prompt / 200_000))
    return out


def run(rule: str, a_answer: int, b_answer: int, seconds: float = 900, seed: int = 1) -> float:
    rnd = random.Random(seed)
    answers = {"A": a_answer, "B": b_answer}
    model = Model(rule, answers)
    jobs = {t: [Job(NODES[answers[t]]) for _ in range(3)] for t in "AB"}
    billed = {"A": 0.0, "B": 0.0}
    flight: list[tuple[float, float, str, Job, int, int]] = []
    now, free = 0.0, PERMITS
    while now < seconds:
        model.decay(now)
        asks = [(t, c) for t in "AB" for c in calls(t, jobs[t], answers[t])]
        rnd.shuffle(asks)
        for tenant, (job, prompt, completion, took) in asks:
            if free == 0:
                break
            if not model.admits(tenant, prompt):
                continue
            model.use[tenant] += prompt
            free -= 1
            if job.left:
                job.left, job.running = job.left - 1, job.running + 1
            else:
                job.aggregating = True
            heapq.heappush(flight, (now + took, rnd.random(), tenant, job, prompt, completion))
        now, _, tenant, job, prompt, completion = heapq.heappop(flight)
        model.decay(now)
        model.use[tenant] += completion
        free += 1
        billed[tenant] += prompt + completion if now > WINDOW_S else 0
        if job.aggregating:
            job.left, job.aggregating = NODES[answers[tenant]], False
        else:
            job.running -= 1
    return billed["A"] / billed["B"]


def main() -> None:
    print("| rule | seed | A short, B long | A long, B short |")
    print("|---|---:|---:|---:|")
    for rule in ("line", "half"):
        for seed in (1, 2, 3):
            cells = [f"{run(rule, a, b, seed=seed):.2f}" for a, b in ((20, 300), (300, 20))]
            print(f"| {rule} | {seed} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
