"""The CPU one chat completion costs the worker in the openai SDK's request path: the SDK's
default client against the workers' (swarm.calls.gateway.make_client: no telemetry headers,
the merged URL kept).

Starts `swarm sim --latency-ms 0` (its own process) and sends ``--requests`` chat completions
one after another through ``swarm.calls.gateway.send`` on each arm's client, arms alternating
for ``--rounds`` rounds after a warm-up. Per arm: the Python function calls per request
(cProfile's count over 100 requests: does not depend on the machine's load) and the median
of the thread's CPU ms per request. Prints a table and writes
ops/bench/results/sdk_request.md.

    python ops/bench/sdk_request.py --requests 300 --rounds 5
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import openai

from swarm.bench import procs
from swarm.calls import gateway
from swarm.calls.request import CallRequest
from swarm.catalog import load_catalog
from swarm.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "ops" / "bench" / "results" / "sdk_request.md"
MESSAGES = [{"role": "system", "content": "You review code."},
            {"role": "user", "content": "Review this diff, please."}]  # fmt: skip


def sdk_default(settings: Settings, base_url: str) -> openai.OpenAI:
    """The SDK's own client with the workers' timeouts and pool (the code before)."""
    workers = gateway.make_client(settings, base_url, "k")
    return openai.OpenAI(base_url=base_url, api_key="k", max_retries=0,
                         timeout=workers.timeout, http_client=workers._client)  # fmt: skip


def workers_client(settings: Settings, base_url: str) -> openai.OpenAI:
    return gateway.make_client(settings, base_url, "k")


ARMS: dict[str, Callable[[Settings, str], openai.OpenAI]] = {
    "SDK default client": sdk_default,
    "make_client (workers)": workers_client,
}


def measure(base_url: str, args: argparse.Namespace) -> dict[str, tuple[float, list[float]]]:
    settings = Settings()
    request = CallRequest.of("j", "n0", load_catalog().model("kimi-k2.5"), MESSAGES, 64)
    clients = {name: make(settings, base_url) for name, make in ARMS.items()}
    calls = {}
    for name, client in clients.items():
        for _ in range(100):  # warm-up: connections, imports
            gateway.send(client, request)
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(100):
            gateway.send(client, request)
        profile.disable()
        calls[name] = pstats.Stats(profile, stream=io.StringIO()).total_calls / 100  # type: ignore[attr-defined]
    cpu: dict[str, list[float]] = {name: [] for name in clients}
    for _ in range(args.rounds):
        for name, client in clients.items():
            start = time.thread_time()
            for _ in range(args.requests):
                gateway.send(client, request)
            cpu[name].append(1000 * (time.thread_time() - start) / args.requests)
    return {name: (calls[name], cpu[name]) for name in clients}


def table(runs: dict[str, tuple[float, list[float]]], args: argparse.Namespace) -> str:
    at = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [
        f"`python ops/bench/sdk_request.py --requests {args.requests} --rounds {args.rounds}` "
        f"at {at}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}",
        "",
        "| client | Python calls/request | CPU ms/request (median) | rounds |",
        "|---|---:|---:|---|",
    ]
    first = None
    for name, (calls, cpu) in runs.items():
        median = statistics.median(cpu)
        first = first or (calls, median)
        rounds = ", ".join(f"{c:.3f}" for c in cpu)
        lines.append(f"| {name} | {calls:.0f} | {median:.3f} | {rounds} |")
    assert first is not None
    calls, median = list(runs.values())[-1][0], statistics.median(list(runs.values())[-1][1])
    lines += ["", f"make_client / SDK default: {calls / first[0]:.2f}x the Python calls, "
              f"{median / first[1]:.2f}x the CPU per request"]  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory() as folder,
        procs.sim(Path(folder), ["--latency-ms", "0"]) as sim,
    ):
        runs = measure(sim.base_url, args)
    text = table(runs, args)
    print(text)
    OUT.write_text(text)


if __name__ == "__main__":
    main()
