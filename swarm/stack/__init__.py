"""The compose stack as local processes: `swarm stack up|down|status`.

docker-compose.yml is the one definition of the deployment; ``compose`` reads it, ``plan``
turns its services into local processes (addresses and ports made local), ``runner`` starts
and stops them, and ``state`` remembers what was started.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from swarm.stack.compose import load_compose, load_env
from swarm.stack.plan import plan
from swarm.stack.runner import down, status, up
from swarm.stack.state import ProcessState, StackState

DEFAULT_RUN_DIR = Path(".swarm-stack")
DEFAULT_TIMEOUT_S = 90.0


def stack_up(
    compose_file: Path,
    run_dir: Path = DEFAULT_RUN_DIR,
    *,
    env_file: Path | None = None,
    profiles: Sequence[str] = (),
    replicas: Mapping[str, int] | None = None,
    ports: Mapping[str, int] | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> StackState:
    """Start the services of ``compose_file`` as local processes; their state."""
    env = load_env(env_file, os.environ)
    compose = load_compose(compose_file, env)
    run_dir.mkdir(parents=True, exist_ok=True)
    processes = plan(compose, run_dir, profiles=profiles, replicas=replicas, ports=ports)
    state = up(processes, run_dir, compose_file, timeout_s)
    write_scrape_targets(run_dir, state)
    return state


def write_scrape_targets(run_dir: Path, state: StackState) -> Path:
    """``prometheus-targets.json`` (Prometheus file_sd format): every worker's endpoint and
    Flower's, labelled by service and process."""
    targets = [
        {
            "targets": [f"127.0.0.1:{port}"],
            "labels": {"service": p.service, "process": p.name},
        }
        for p in state.processes
        if (port := p.metrics_port or (p.port if p.service == "flower" else None))
    ]
    path = run_dir / "prometheus-targets.json"
    path.write_text(json.dumps(targets, indent=2), encoding="utf-8")
    return path


__all__ = [
    "DEFAULT_RUN_DIR",
    "ProcessState",
    "StackState",
    "down",
    "stack_up",
    "status",
]
