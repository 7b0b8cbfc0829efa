"""Opt-in: one job traced into Arize Phoenix, and a screenshot of its trace (docs/tracing.md).

Starts what it needs on free ports of 127.0.0.1: Phoenix (``--phoenix``: the command that
runs ``phoenix serve``, e.g. from a venv of its own; or ``--phoenix-url`` of one already
running), a private redis-server, the simulator and two `celery -A workers worker`
processes, all tracing to Phoenix over OTLP/HTTP through the standard OTEL_* variables.
Submits one job from this process (the trace's root), waits for its report, stops the
workers (they export what they hold on shutdown), finds the trace in Phoenix and has
headless Chromium take a screenshot of it. Everything it started stops by itself.

    python -m venv /tmp/phoenix && /tmp/phoenix/bin/pip install arize-phoenix
    python ops/tracing_phoenix.py --phoenix "/tmp/phoenix/bin/phoenix serve" \\
        --screenshot docs/img/tracing-phoenix.png

Needs the ``otel`` extra (``pip install -e '.[otel]'``), redis-server and chromium.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from swarm import tracing
from swarm.client import SwarmClient
from swarm.procs import Process, free_port
from swarm.procs.services import spawn_celery_worker, start_redis, start_sim, wait_workers
from swarm.records import InputItem
from swarm.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
KEY = "sk-tracing-demo"


def wait_until(check: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.2)


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def graphql(phoenix: str, query: str) -> dict[str, Any]:
    body = json.dumps({"query": query}).encode()
    request = urllib.request.Request(f"{phoenix}/graphql", body,
                                     {"Content-Type": "application/json"})  # fmt: skip
    with urllib.request.urlopen(request, timeout=10) as response:
        found: dict[str, Any] = json.loads(response.read())["data"]
        return found


def trace_page(phoenix: str, trace_id: str) -> str | None:
    """The URL of the trace's page, its first LLM span selected, once Phoenix has ingested
    the trace; else None."""
    projects = graphql(phoenix, "{ projects { edges { node { id name } } } }")
    for edge in projects["projects"]["edges"]:
        project = edge["node"]["id"]
        query = f'{{ node(id: "{project}") {{ ... on Project {{ trace(traceId: "{trace_id}") '
        query += "{ spans(first: 1000) { edges { node { id name spanKind } } } } } } }"
        found = graphql(phoenix, query)["node"]["trace"]
        if found:
            spans = [e["node"] for e in found["spans"]["edges"]]
            llm = next((s["id"] for s in spans if str(s["spanKind"]).lower() == "llm"), None)
            selected = f"?selectedSpanNodeId={llm}" if llm else ""
            return f"{phoenix}/projects/{project}/traces/{trace_id}{selected}"
    return None


def run_job(settings: Settings, inputs: int) -> str:
    """Submit one job, wait for its report; its trace id."""
    items = [InputItem(ref=f"doc-{i:02d}.md", text=f"document {i}: notes") for i in range(inputs)]
    with SwarmClient.from_settings(settings) as client:
        handle = client.submit(items, "Summarise this document")
        report = handle.wait(timeout=300)
        print(f"job {handle.id}: {report.status}, {report.succeeded}/{report.total} nodes")
        spec = client.store.spec(handle.id)
    assert spec.trace_parent, "the producer did not trace (is the otel extra installed?)"
    return spec.trace_parent.split("-")[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--phoenix", help="command that runs `phoenix serve`")
    parser.add_argument("--phoenix-url", help="a Phoenix already running (default: started)")
    parser.add_argument("--inputs", type=int, default=20)
    parser.add_argument("--screenshot", type=Path, default=ROOT / "docs/img/tracing-phoenix.png")
    parser.add_argument("--chromium", default="chromium")
    args = parser.parse_args()
    started: list[Process] = []
    with tempfile.TemporaryDirectory(prefix="swarm-phoenix-") as tmp:
        folder = Path(tmp)
        try:
            phoenix = args.phoenix_url or start_phoenix(args.phoenix, folder, started)
            trace_id = traced_job(phoenix, folder, args.inputs, started)
            wait_until(lambda: trace_page(phoenix, trace_id) is not None, 60,
                       "the trace in Phoenix")  # fmt: skip
            page = trace_page(phoenix, trace_id)
            assert page is not None
            print(f"trace {trace_id}: {page}")
            shoot(args.chromium, page, args.screenshot)
            print(f"screenshot: {args.screenshot}")
        finally:
            for proc in reversed(started):
                proc.terminate(10)


def start_phoenix(command: str | None, folder: Path, started: list[Process]) -> str:
    if not command:
        raise SystemExit("give --phoenix (the command that runs `phoenix serve`) or --phoenix-url")
    port = free_port()
    env = {"PHOENIX_PORT": str(port), "PHOENIX_GRPC_PORT": str(free_port()),
           "PHOENIX_WORKING_DIR": str(folder / "phoenix"), "PHOENIX_HOST": "127.0.0.1",
           "PHOENIX_TELEMETRY_ENABLED": "false"}  # fmt: skip
    proc = Process(shlex.split(command), folder / "phoenix.log", env=env, name="phoenix")
    started.append(proc)
    url = f"http://127.0.0.1:{port}"
    wait_until(lambda: answers(f"{url}/healthz"), 120, "Phoenix")
    return url


def traced_job(phoenix: str, folder: Path, inputs: int, started: list[Process]) -> str:
    """Redis, the simulator and two workers tracing to ``phoenix``; one job; its trace id
    once the workers have stopped (and exported their spans)."""
    otel = {"OTEL_EXPORTER_OTLP_ENDPOINT": phoenix, "OTEL_BSP_SCHEDULE_DELAY": "200"}
    os.environ.update({**otel, "OTEL_SERVICE_NAME": "swarm-producer"})
    redis_port = free_port()
    started.append(start_redis(folder, redis_port))
    sim_port = free_port()
    sim_args = ["--latency-p50-ms", "300", "--latency-p99-ms", "900", "--seed", "7"]
    started.append(start_sim(sim_args, folder, sim_port, cwd=ROOT))
    broker = f"redis://127.0.0.1:{redis_port}/0"
    base_url = f"http://127.0.0.1:{sim_port}/v1"
    env = {**otel, "SWARM_BROKER_URL": broker, "SWARM_BASE_URL": base_url, "SWARM_API_KEY": KEY}
    workers = [
        spawn_celery_worker(
            {**env, "OTEL_SERVICE_NAME": f"swarm-worker-{n}"},
            None,
            8,
            f"w{n}@%h",
            folder,
            cwd=ROOT,
        )
        for n in (1, 2)
    ]
    started.extend(workers)
    wait_workers(workers)
    assert tracing.setup("swarm-producer"), "tracing is off: install the otel extra"
    settings = Settings(broker_url=broker, base_url=base_url, api_key=KEY, nodes_per_task=4)  # type: ignore[arg-type]
    trace_id = run_job(settings, inputs)
    tracing.shutdown()
    for worker in workers:
        worker.terminate(30)  # a warm shutdown exports what the worker holds
    return trace_id


def shoot(chromium: str, page: str, path: Path) -> None:
    """A screenshot of ``page`` by headless Chromium (the app renders in the browser: the
    virtual time budget lets it load the trace first)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         "--window-size=1600,1000", "--virtual-time-budget=15000",
         f"--screenshot={path}", page],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    assert path.stat().st_size > 0


if __name__ == "__main__":
    main()
