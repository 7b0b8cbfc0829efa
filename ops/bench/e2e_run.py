"""The end-to-end measurement: `swarm run --json` through Redis and two workers.

Starts a private redis-server, `swarm sim` and two `celery -A workers worker` processes,
runs a 100-input swarm with `swarm run --json` per latency setting, and prints wall time and
whether the report's usage equals the simulator's /stats. Everything is local and stops
by itself.

    python ops/bench/e2e_run.py                 # latency 0 and a fixed 1 s
    python ops/bench/e2e_run.py --inputs 200 --concurrency 100
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_http(url: str, timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            urllib.request.urlopen(url, timeout=1).close()
            return
        time.sleep(0.05)
    raise SystemExit(f"no answer from {url}")


def http_json(url: str, method: str = "GET") -> dict:  # type: ignore[type-arg]
    with urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=5) as r:
        return json.loads(r.read() or b"{}")  # type: ignore[no-any-return]


@contextlib.contextmanager
def processes(workdir: Path, latency_ms: int, concurrency: int) -> Iterator[dict[str, str]]:
    redis_port, sim_port = free_port(), free_port()
    procs = [
        subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(redis_port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(workdir),
            ],
            stdout=subprocess.DEVNULL,
        )
    ]
    sim_args = ["--latency-ms", str(latency_ms)] if latency_ms else []
    procs.append(
        subprocess.Popen(
            [sys.executable, "-m", "swarm.cli.main", "sim", "--port", str(sim_port), *sim_args],
            stderr=subprocess.DEVNULL,
        )
    )
    env = {
        **os.environ,
        "SWARM_BROKER_URL": f"redis://127.0.0.1:{redis_port}/0",
        "SWARM_BASE_URL": f"http://127.0.0.1:{sim_port}/v1",
        "SWARM_API_KEY": "bench",
    }
    try:
        wait_http(f"http://127.0.0.1:{sim_port}/health")
        for name in ("w1", "w2"):
            log = open(workdir / f"{name}.log", "w")  # noqa: SIM115 - closed with the process
            procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "celery",
                        "-A",
                        "workers",
                        "worker",
                        "-n",
                        f"{name}@%h",
                        "-c",
                        str(concurrency),
                        "--without-gossip",
                        "--without-mingle",
                        "-l",
                        "INFO",
                    ],
                    env=env,
                    cwd=ROOT,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            logs = [(workdir / f"{n}.log").read_text() for n in ("w1", "w2")]
            if all(" ready." in text for text in logs):
                break
            time.sleep(0.1)
        yield env
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(10)


def one_run(workdir: Path, n_inputs: int, latency_ms: int, concurrency: int) -> dict[str, object]:
    inputs = workdir / "inputs.txt"
    inputs.write_text("".join(f"diff --git a/f{i}.py +x = {i}\n" for i in range(n_inputs)))
    with processes(workdir, latency_ms, concurrency) as env:
        sim = env["SWARM_BASE_URL"].removesuffix("/v1")
        http_json(f"{sim}/stats/reset", "POST")
        t0 = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "swarm.cli.main", "run", "-", "--json"],
            stdin=inputs.open(),
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        wall_cli = time.perf_counter() - t0
        if done.returncode != 0:
            raise SystemExit(f"swarm run failed: {done.stderr}")
        report = json.loads(done.stdout)
        stats = http_json(f"{sim}/stats")
    usage = report["usage"]
    return {
        "latency": f"{latency_ms} ms" if latency_ms else "0",
        "status": report["status"],
        "ok": f"{report['succeeded']}/{report['total']}",
        "wall_s (report)": report["wall_s"],
        "wall_s (CLI)": round(wall_cli, 2),
        "calls": sum(m["calls"] for m in report["models"].values()),
        "sim completed": stats["completed"],
        "prompt = /stats": usage["prompt_tokens"] == stats["prompt_tokens"],
        "completion = /stats": usage["completion_tokens"] == stats["completion_tokens"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=50, help="threads per worker")
    parser.add_argument("--latency-ms", type=int, nargs="*", default=[0, 1000])
    args = parser.parse_args()
    rows = []
    for latency in args.latency_ms:
        with tempfile.TemporaryDirectory() as tmp:
            rows.append(one_run(Path(tmp), args.inputs, latency, args.concurrency))
    cols = list(rows[0])
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for row in rows:
        print("| " + " | ".join(str(row[c]) for c in cols) + " |")


if __name__ == "__main__":
    main()
