"""`swarm stack up` end to end: read the compose file and its variables, plan the local
processes, start them, and write the scrape targets of what started."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from swarm.stack import DEFAULT_RUN_DIR, DEFAULT_TIMEOUT_S
from swarm.stack.compose import load_compose, load_env
from swarm.stack.plan import plan
from swarm.stack.runner import up
from swarm.stack.state import StackState


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
