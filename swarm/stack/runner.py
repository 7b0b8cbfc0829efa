"""Start, stop and inspect the local stack's processes.

``up`` starts each wave of the plan (redis first, then what depends on it), waits until every
process of the wave is ready, and records each process in the state file as soon as it starts,
so a failed ``up`` can still be stopped. ``down`` signals each process group (workers first),
waits its grace period, then SIGKILLs what is left.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from swarm.errors import ProcessError, StackError
from swarm.procs import Process, port_open, stop_groups, wait_ready
from swarm.procs.services import CELERY_READY
from swarm.procs.tunables import TUNABLES_ENV, merge
from swarm.stack.plan import LocalProcess
from swarm.stack.state import (
    ProcessState,
    StackState,
    alive,
    new_state,
    ours_or_gone,
    read_state,
    reap,
    remove_state,
    start_ticks,
    write_state,
)

SETTLE_S = 0.5
"""A process with no port and no ready line counts as started once alive this long."""


def up(
    processes: Sequence[LocalProcess], run_dir: Path, compose_file: Path, timeout_s: float
) -> StackState:
    """Start ``processes`` wave by wave; on any failure stop what started and raise."""
    existing = read_state(run_dir)
    if existing is not None and any(alive(p) for p in existing.processes):
        raise StackError(f"a stack is already up in {run_dir}: run `swarm stack down` first")
    logs = run_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    state = new_state(compose_file.resolve())
    write_state(run_dir, state)
    try:
        for wave in sorted({p.wave for p in processes}):
            batch = [p for p in processes if p.wave == wave]
            started = [(p, _start(p, logs, compose_file.parent)) for p in batch]
            recorded = tuple(_recorded(p, child) for p, child in started)
            state = state.model_copy(update={"processes": (*state.processes, *recorded)})
            write_state(run_dir, state)
            _wait_ready(started, timeout_s)
    except BaseException:
        down(run_dir)
        raise
    return state


def _start(proc: LocalProcess, logs: Path, cwd: Path) -> Process:
    log_path = logs / f"{proc.name}.log"
    log_path.write_bytes(b"")  # a fresh log: readiness is read from it
    env = process_env(proc.env, os.environ)
    return Process(proc.argv, log_path, env=env, cwd=cwd, name=proc.name, stop_at_exit=False)


def process_env(service_env: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """A process's environment: the shell's (``environ``) under its service's, except
    ``GLIBC_TUNABLES``: the shell's tunables win over the compose file's one by one
    (``tcache_count=0`` stays beside an exported ``glibc.pthread.rseq=0``)."""
    env = {**environ, **service_env}
    if TUNABLES_ENV in service_env and environ.get(TUNABLES_ENV):
        env[TUNABLES_ENV] = merge(service_env[TUNABLES_ENV], environ[TUNABLES_ENV])
    return env


def _recorded(proc: LocalProcess, child: Process) -> ProcessState:
    """``proc``'s fields that the state keeps, with what only the started child knows."""
    planned = proc.model_dump(include=set(ProcessState.model_fields))
    pid = child.pid
    log = str(child.log_path.resolve())
    return ProcessState(**planned, pid=pid, start_ticks=start_ticks(pid), log=log)


def _wait_ready(started: Sequence[tuple[LocalProcess, Process]], timeout_s: float) -> None:
    try:
        wait_ready([child.readiness(_probe(p, child)) for p, child in started], timeout_s)
    except ProcessError as exc:
        raise StackError(str(exc)) from None


def _probe(proc: LocalProcess, child: Process) -> Callable[[], bool]:
    port = proc.port
    if proc.ready == "port" and port:
        return lambda: child.alive and port_open(port)  # alive first: a port can be another's
    if proc.ready == "celery":
        return lambda: CELERY_READY.search(child.log_text()) is not None
    settled = time.monotonic() + SETTLE_S
    return lambda: time.monotonic() >= settled  # nothing to probe: alive a moment is started


@dataclass(frozen=True)
class _Recorded:
    """A process of the state file as a group leader (it may belong to an earlier command)."""

    state: ProcessState

    @property
    def pid(self) -> int:
        return self.state.pid

    def running(self) -> bool:
        reap(self.state.pid)  # our child when `up` fails and stops what it started
        return alive(self.state)

    def ours(self) -> bool:
        return ours_or_gone(self.state)


def down(run_dir: Path) -> list[ProcessState]:
    """Stop every process of the stack in ``run_dir`` (latest wave first); the stopped ones."""
    state = read_state(run_dir)
    if state is None:
        return []
    stopped: list[ProcessState] = []
    for wave in sorted({p.wave for p in state.processes}, reverse=True):
        batch = [_Recorded(p) for p in state.processes if p.wave == wave]
        leaders = [(p, signal.Signals[p.state.stop_signal]) for p in batch]
        grace_s = max((p.state.stop_grace_s for p in batch), default=0.0)
        stopped += [p.state for p in stop_groups(leaders, grace_s)]
    remove_state(run_dir)
    return stopped


def status(run_dir: Path) -> list[tuple[ProcessState, bool]]:
    """Each recorded process and whether it still runs."""
    state = read_state(run_dir)
    return [] if state is None else [(p, alive(p)) for p in state.processes]
