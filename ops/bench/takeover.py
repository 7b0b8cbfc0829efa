"""Issue 15's "Done when" measurement: a killed or frozen worker with DEFAULT settings.

Per broker (a private redis-server; for ``amqp`` a RabbitMQ vhost of its own on
127.0.0.1:5672, guest/guest, Redis as the job store), the simulator answering every call in
``--latency-ms`` (3 s), and three `celery -A workers worker` processes (``-c`` threads):

- kill: SIGKILL of one worker at the first progress reading of >= 40% of ``--inputs`` (100);
  prints the nodes it held, kill to report against the bound 3 s x held / 2 workers left +
  20 s, every node succeeded, gateway requests against 101 + held, ledger calls, overlaps.
- stop: SIGSTOP of one worker once it holds leased tasks, SIGCONT ``--stop-s`` (30 s) later,
  then wait until Celery's inspection shows it holds none of the job's tasks; prints stop to
  report, ledger == report == simulator (answered calls), late calls, overlaps.

No timeout, lease or visibility setting is tuned: SWARM_LEASE_S 10 s, the visibility timeout
900 s. Prints a Markdown table; everything it starts stops by itself.

    python ops/bench/takeover.py                          # both brokers, both faults
    python ops/bench/takeover.py --brokers redis --faults kill
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import subprocess
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from swarm.client import SwarmClient
from swarm.errors import JobTimeoutError
from swarm.jobs.queueing import AGGREGATE_TASK, SUBAGENT_TASK, SUBAGENTS_TASK
from swarm.procs import Process, free_port
from swarm.procs.services import spawn_celery_worker, start_redis, start_sim, wait_workers
from swarm.records import InputItem
from swarm.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-bench-takeover"
MODEL = "kimi-k2.5"
LEASED = {SUBAGENT_TASK, SUBAGENTS_TASK, AGGREGATE_TASK}
TASK_LINE = r"Task swarm\.subagents?\[({job}-[^\]]+)\] {event}"


def wait_until(check: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.05)


def task_ids(log: str, job_id: str, event: str) -> set[str]:
    return set(re.findall(TASK_LINE.format(job=re.escape(job_id), event=event), log))


def nodes_of(task_ids_: set[str], job_id: str, node_ids: list[str]) -> set[str]:
    """Nodes the task ids carry (``<job>-<node>`` or ``<job>-<first>-<last>``)."""
    found: set[str] = set()
    for task_id in task_ids_:
        parts = [p for p in task_id.removeprefix(f"{job_id}-").split("-") if p in node_ids]
        start, end = node_ids.index(parts[0]), node_ids.index(parts[-1])
        found.update(node_ids[start : end + 1])
    return found


class Bench:
    """One broker's processes."""

    def __init__(self, broker: str, folder: Path, args: argparse.Namespace) -> None:
        self.broker, self.folder, self.args = broker, folder, args
        self.procs: list[Process] = []
        self.vhost: str | None = None

    @contextlib.contextmanager
    def running(self) -> Iterator[Bench]:
        try:
            port = free_port()
            self.procs.append(start_redis(self.folder, port, log_dir=self.folder))
            redis_url = f"redis://127.0.0.1:{port}/0"
            sim_port = free_port()
            sim_args = ["--latency-ms", str(self.args.latency_ms), "--seed", "15"]
            self.procs.append(start_sim(sim_args, self.folder, sim_port, cwd=ROOT))
            self.sim_url = f"http://127.0.0.1:{sim_port}"
            self.env = {
                "SWARM_BROKER_URL": redis_url,
                "SWARM_BASE_URL": f"{self.sim_url}/v1",
                "SWARM_API_KEY": KEY,
            }
            if self.broker == "amqp":
                self.vhost = f"swarm-bench-{uuid.uuid4().hex[:8]}"
                ctl("add_vhost", self.vhost)
                ctl("set_permissions", "-p", self.vhost, "guest", ".*", ".*", ".*")
                self.env["SWARM_BROKER_URL"] = f"amqp://guest:guest@127.0.0.1:5672/{self.vhost}"
                self.env["SWARM_RESULT_URL"] = f"redis://127.0.0.1:{port}/1"
            yield self
        finally:
            for proc in reversed(self.procs):
                proc.terminate(10)
            if self.vhost is not None:
                ctl("delete_vhost", self.vhost)

    def client(self) -> SwarmClient:
        fields = {k.removeprefix("SWARM_").lower(): v for k, v in self.env.items()}
        return SwarmClient.from_settings(Settings(**fields))

    def workers(self, n: int, tag: str) -> list[Process]:
        started = [
            spawn_celery_worker(
                self.env, None, self.args.concurrency, f"{tag}{i}@%h", self.folder,
                extra=["-E"], cwd=ROOT,
            )
            for i in range(1, n + 1)
        ]  # fmt: skip
        self.procs += started
        wait_workers(started)
        return started

    def stats(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"{self.sim_url}/stats", timeout=5) as resp:
            return json.loads(resp.read())  # type: ignore[no-any-return]

    def reset_stats(self) -> None:
        req = urllib.request.Request(f"{self.sim_url}/stats/reset", method="POST")
        urllib.request.urlopen(req, timeout=5).close()


def ctl(*args: str) -> None:
    subprocess.run(["rabbitmqctl", *args], capture_output=True, check=True, timeout=60)


def inputs(n: int, marker: str) -> list[InputItem]:
    return [InputItem(ref=f"doc-{i:04d}", text=f"document {i}: {marker}") for i in range(n)]


def held_nodes(client: SwarmClient, log: str, job_id: str) -> set[str]:
    held = task_ids(log, job_id, "received") - task_ids(log, job_id, "succeeded")
    node_ids = list(client.store.spec(job_id).node_ids)
    done = {env.node_id for env in client.store.envelopes(job_id)}
    return nodes_of(held, job_id, node_ids) - done


def idle(client: SwarmClient, worker: Process, job_id: str) -> bool:
    ready = re.search(r"\] (\S+@\S+) ready\.", worker.log_text())
    if ready is None:
        return False
    name = ready.group(1)
    inspect = client.app.control.inspect(destination=[name], timeout=1.0)
    tasks: list[dict[str, Any]] = []
    for listing in (inspect.active(), inspect.reserved(), inspect.scheduled()):
        if not listing or name not in listing:
            return False
        tasks += [t.get("request", t) for t in listing[name]]
    ours = [t for t in tasks if str(t.get("id", "")).startswith(job_id)]
    return not any(t.get("name") in LEASED for t in ours)


def kill(bench: Bench) -> dict[str, Any]:
    workers = bench.workers(3, "k")
    victim, client, n = workers[2], bench.client(), bench.args.inputs
    bench.reset_stats()
    handle = client.submit(inputs(n, "kill"), "Summarise this document")
    wait_until(lambda: handle.progress().nodes_done >= 0.4 * n, 600, "40% done")
    victim.kill()
    killed_at = time.monotonic()
    held = held_nodes(client, victim.log_text(), handle.id)
    report = handle.wait(timeout=1200).to_dict()
    kill_to_report = time.monotonic() - killed_at
    stats = bench.stats()
    for worker in workers[:2]:
        worker.terminate(30)
    return {
        "fault": "SIGKILL 1 of 3 at 40%",
        "held": len(held),
        "woken_received": "",
        "fault_to_report_s": round(kill_to_report, 1),
        "bound_s": round(bench.args.latency_ms / 1000 * len(held) / 2 + 20, 1),
        "succeeded": f"{report['succeeded']}/{n}",
        "requests": f"{stats['requests']} (<= {n + 1 + len(held)})",
        "ledger": client.store.ledger(handle.id)[MODEL].calls,
        "report": report["models"][MODEL]["calls"],
        "answered": stats["completed"],
        "overlaps": stats["slots"]["overlaps"],
    }


def stop(bench: Bench) -> dict[str, Any]:
    workers = bench.workers(3, "s")
    frozen, client, n = workers[2], bench.client(), bench.args.inputs
    bench.reset_stats()
    handle = client.submit(inputs(n, "stop"), "Summarise this document")

    def leased() -> bool:
        log = frozen.log_text()
        open_ids = task_ids(log, handle.id, "received") - task_ids(log, handle.id, "succeeded")
        names = [f"swarm:{{job:{handle.id}}}:task:{t}" for t in open_ids]
        r = client.store.redis  # type: ignore[attr-defined]
        return bool(names) and int(r.exists(*names)) == len(names)

    wait_until(leased, 600, "the worker runs leased tasks")
    os.killpg(frozen.pid, signal.SIGSTOP)
    stopped_at = time.monotonic()
    report: dict[str, Any] | None = None
    try:
        with contextlib.suppress(JobTimeoutError):
            report = handle.wait(
                timeout=bench.args.stop_s
            ).to_dict()  # taken over while it is frozen
        stop_to_report = time.monotonic() - stopped_at
        time.sleep(max(0.0, bench.args.stop_s - (time.monotonic() - stopped_at)))  # the fault
    finally:
        woke_at = len(frozen.log_text())
        os.killpg(frozen.pid, signal.SIGCONT)
    before_cont = report is not None
    if report is None:
        report = handle.wait(timeout=1200).to_dict()
        stop_to_report = time.monotonic() - stopped_at
    wait_until(lambda: idle(client, frozen, handle.id), 300, "the woken worker's runs ended")
    # Its node threads may still be answering calls sent before the freeze.
    wait_until(lambda: (lambda st: st["requests"] == st["completed"])(bench.stats()), 120, "calls")
    ledger = client.store.ledger(handle.id)[MODEL].calls
    after = r.to_dict() if (r := client.attach(handle.id).report()) else report
    woken = re.findall(r"Task (swarm\.\w+)\[[^\]]+\] received", frozen.log_text()[woke_at:])
    stats = bench.stats()
    for worker in workers:
        worker.terminate(30)
    return {
        "fault": f"SIGSTOP 1 of 3 for {bench.args.stop_s:.0f} s",
        "held": "",
        "fault_to_report_s": round(stop_to_report, 1),
        "bound_s": "" if before_cont else "report only after SIGCONT",
        "woken_received": ",".join(sorted(set(woken))),
        "succeeded": f"{report['succeeded']}/{n}",
        "requests": str(stats["requests"]),
        "ledger": ledger,
        "report": f"{after['models'][MODEL]['calls']} (late {after.get('late_calls', 0)})",
        "answered": stats["completed"],
        "overlaps": stats["slots"]["overlaps"],
    }


def logs_in(root: Path | None, broker: str, fault: str) -> Path | None:
    if root is None:
        return None
    folder = root / f"{broker}-{fault}"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--brokers", nargs="+", default=["redis", "amqp"])
    parser.add_argument("--faults", nargs="+", default=["kill", "stop"])
    parser.add_argument("--inputs", type=int, default=100)
    parser.add_argument("--latency-ms", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=4, help="threads per worker")
    parser.add_argument("--stop-s", type=float, default=30.0)
    parser.add_argument("--logs", type=Path, help="keep the processes' logs here")
    args = parser.parse_args()
    rows: list[tuple[str, dict[str, Any]]] = []
    for broker in args.brokers:
        for fault in args.faults:
            with (
                tempfile.TemporaryDirectory(prefix="swarm-takeover-") as tmp,
                Bench(
                    broker, logs_in(args.logs, broker, fault) or Path(tmp), args
                ).running() as bench,
            ):
                row = (kill if fault == "kill" else stop)(bench)
                rows.append((broker, row))
                print(broker, json.dumps(row), flush=True)
    head = list(rows[0][1])
    print("\n| broker | " + " | ".join(head) + " |")
    print("|---" * (len(head) + 1) + "|")
    for broker, row in rows:
        print(f"| {broker} | " + " | ".join(str(row[k]) for k in head) + " |")


if __name__ == "__main__":
    main()
