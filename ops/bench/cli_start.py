"""How long the `swarm` CLI takes to start: the median wall time of N runs of each command.

Runs this environment's `swarm` console script as a user types it. Starts a private
redis-server on a free port holding one finished job (the report of a small `swarm demo`), so
`swarm status JOB` and `swarm cost JOB` read a real report, and bare `swarm status` shows the
(empty) per-model admission counters; prints a Markdown table.

    python ops/bench/cli_start.py                                  # 5 runs of each command
    python ops/bench/cli_start.py --runs 9 --tree before=/tmp/main --tree after=.

Each ``--tree NAME=DIR`` is one column: the same console script with DIR first on PYTHONPATH
(DIR holds a `swarm/` package, e.g. a `git archive` of another commit). The trees' runs are
interleaved, so a change in the machine's load hits every column alike.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from swarm.procs.services import on_free_port, start_redis
from swarm.records import JobSpec
from swarm.settings import load_settings
from swarm.store import RedisJobStore

SWARM = Path(sys.executable).parent / "swarm"
"""The console script installed next to this interpreter."""
GATEWAY = "http://127.0.0.1:9/v1"
"""SWARM_BASE_URL of the runs: never called (`status` without a job reads Redis only)."""


def commands(job_id: str, report_file: Path) -> dict[str, list[str]]:
    """What each row runs: its label, and the arguments of `swarm`."""
    return {
        "swarm --help": ["--help"],
        "swarm status --help": ["status", "--help"],
        "swarm cost --help": ["cost", "--help"],
        "swarm status JOB": ["status", job_id],
        "swarm cost JOB": ["cost", job_id],
        "swarm cost REPORT.json": ["cost", str(report_file)],
        "swarm status (per-model counters)": ["status"],
    }


def demo_report(env: dict[str, str]) -> dict[str, Any]:
    """A finished job's report from a small embedded demo."""
    argv = [str(SWARM), "demo", "--inputs", "4", "--json"]
    out = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
    report: dict[str, Any] = json.loads(out.stdout)
    return report


def store_job(broker_url: str, report: dict[str, Any]) -> str:
    """Write the demo's job (spec and report) into the job store that ``broker_url`` names."""
    settings = load_settings(broker_url=broker_url)
    url = settings.backend_url()
    assert url is not None
    nodes = report["nodes"]
    spec = JobSpec(
        job_id=report["job_id"],
        instruction="bench",
        aggregate_instruction="bench",
        model=nodes[0]["model"],
        aggregate_model=nodes[0]["model"],
        node_ids=tuple(n["node_id"] for n in nodes),
        input_refs=tuple(n["input_ref"] for n in nodes),
        submitted_at=time.time(),
    )
    store = RedisJobStore.for_settings(settings, url)
    store.create_job(spec, ["x"] * len(nodes))
    store.save_report(spec.job_id, report)
    return spec.job_id


def wall_s(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.decode()}")
    return elapsed


def measure(
    cmds: dict[str, list[str]], trees: dict[str, str | None], runs: int, env: dict[str, str]
) -> dict[tuple[str, str], float]:
    """Median wall seconds per (row, tree); the trees' runs alternate."""
    times: dict[tuple[str, str], list[float]] = {}
    for label, args in cmds.items():
        for _ in range(runs):
            for name, tree in trees.items():
                tree_env = dict(env, PYTHONPATH=tree) if tree else env
                times.setdefault((label, name), []).append(wall_s([str(SWARM), *args], tree_env))
    return {key: statistics.median(values) for key, values in times.items()}


def table(medians: dict[tuple[str, str], float], trees: list[str], runs: int) -> str:
    heads = [f"{name} (median s of {runs})" for name in trees]
    lines = ["| command | " + " | ".join(heads) + " |", "|---" * (len(trees) + 1) + "|"]
    for cmd in dict.fromkeys(c for c, _ in medians):
        cells = [f"{medians[(cmd, name)]:.3f}" for name in trees]
        lines.append(f"| `{cmd}` | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def parse_tree(text: str) -> tuple[str, str]:
    name, sep, folder = text.partition("=")
    if not sep or not (Path(folder) / "swarm" / "__init__.py").is_file():
        raise argparse.ArgumentTypeError(f"want NAME=DIR with DIR/swarm/__init__.py: {text}")
    return name, str(Path(folder).resolve())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="Runs of each command (default 5).")
    parser.add_argument("--tree", type=parse_tree, action="append", default=[], metavar="NAME=DIR")
    args = parser.parse_args()
    trees: dict[str, str | None] = dict(args.tree) or {"installed": None}
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWARM_")}
    env.pop("PYTHONPATH", None)
    report = demo_report(env)
    with tempfile.TemporaryDirectory() as folder:
        redis_proc, port = on_free_port(lambda p: start_redis(Path(folder), p))
        with redis_proc:
            env["SWARM_BROKER_URL"] = f"redis://127.0.0.1:{port}/0"
            env["SWARM_BASE_URL"] = GATEWAY  # the per-model counters are kept per gateway
            job_id = store_job(env["SWARM_BROKER_URL"], report)
            report_file = Path(folder) / "report.json"
            report_file.write_text(json.dumps(report), "utf-8")
            medians = measure(commands(job_id, report_file), trees, args.runs, env)
    print(table(medians, list(trees), args.runs))


if __name__ == "__main__":
    main()
