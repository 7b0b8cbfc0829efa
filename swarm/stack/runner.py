"""Start, stop and inspect the local stack's processes.

``up`` starts each wave of the plan (redis first, then what depends on it), waits until every
process of the wave is ready, and records each process in the state file as soon as it starts,
so a failed ``up`` can still be stopped. ``down`` signals each process group (workers first),
waits its grace period, then SIGKILLs what is left.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from swarm.errors import StackError
from swarm.stack.plan import LOOPBACK, LocalProcess
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

CELERY_READY = re.compile(r"\S+@\S+ ready\.")
POLL_S = 0.1
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
            started = [_start(p, logs, compose_file.parent) for p in batch]
            state = state.model_copy(update={"processes": (*state.processes, *started)})
            write_state(run_dir, state)
            _wait_ready(batch, started, timeout_s)
    except BaseException:
        down(run_dir)
        raise
    return state


def _start(proc: LocalProcess, logs: Path, cwd: Path) -> ProcessState:
    log_path = logs / f"{proc.name}.log"
    env = {**os.environ, **proc.env, "PYTHONUNBUFFERED": "1"}
    with open(log_path, "wb") as log:  # a fresh log: readiness is read from it
        child = subprocess.Popen(
            proc.argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=cwd,
            start_new_session=True,  # its own process group: `down` signals the whole group
        )
    return ProcessState(
        name=proc.name,
        service=proc.service,
        wave=proc.wave,
        pid=child.pid,
        start_ticks=start_ticks(child.pid),
        port=proc.port,
        metrics_port=proc.metrics_port,
        log=str(log_path.resolve()),
        stop_signal=proc.stop_signal,
        stop_grace_s=proc.stop_grace_s,
    )


def _wait_ready(
    batch: Sequence[LocalProcess], started: Sequence[ProcessState], timeout_s: float
) -> None:
    pending = dict(zip(started, batch, strict=True))
    settled = time.monotonic() + SETTLE_S
    deadline = time.monotonic() + timeout_s
    while pending:
        for state, proc in list(pending.items()):
            if not alive(state):  # first: a port can answer for another process
                raise StackError(f"{state.name} exited at start; see {state.log}\n{_tail(state)}")
            if _ready(proc, state, time.monotonic() >= settled):
                del pending[state]
        if pending and time.monotonic() > deadline:
            names = ", ".join(s.name for s in pending)
            logs = Path(started[0].log).parent
            raise StackError(f"not ready after {timeout_s:.0f} s: {names}; logs in {logs}")
        time.sleep(POLL_S)


def _ready(proc: LocalProcess, state: ProcessState, settled: bool) -> bool:
    if proc.ready == "port" and proc.port:
        with contextlib.suppress(OSError), socket.create_connection((LOOPBACK, proc.port), 0.5):
            return True
        return False
    if proc.ready == "celery":
        return CELERY_READY.search(_read(state.log)) is not None
    return settled  # nothing to probe: alive for a moment counts as started


def _read(path: str) -> str:
    try:
        return Path(path).read_bytes().decode("utf-8", "replace")
    except OSError:
        return ""


def _tail(state: ProcessState, lines: int = 15) -> str:
    return "\n".join(_read(state.log).splitlines()[-lines:])


def down(run_dir: Path) -> list[ProcessState]:
    """Stop every process of the stack in ``run_dir`` (latest wave first); the stopped ones."""
    state = read_state(run_dir)
    if state is None:
        return []
    stopped = []
    for wave in sorted({p.wave for p in state.processes}, reverse=True):
        batch = [p for p in state.processes if p.wave == wave]
        stopped += _stop(batch)
    remove_state(run_dir)
    return stopped


def _stop(batch: Sequence[ProcessState]) -> list[ProcessState]:
    running = [p for p in batch if alive(p)]
    for proc in running:
        _signal_group(proc, signal.Signals[proc.stop_signal])
    deadline = time.monotonic() + max((p.stop_grace_s for p in running), default=0.0)
    while time.monotonic() < deadline:
        for proc in running:
            reap(proc.pid)
        if not any(alive(p) for p in running):
            break
        time.sleep(POLL_S)
    for proc in batch:
        if ours_or_gone(proc):
            _signal_group(proc, signal.SIGKILL)  # stragglers, and orphans of a dead leader
        reap(proc.pid)
    return running


def _signal_group(proc: ProcessState, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def status(run_dir: Path) -> list[tuple[ProcessState, bool]]:
    """Each recorded process and whether it still runs."""
    state = read_state(run_dir)
    return [] if state is None else [(p, alive(p)) for p in state.processes]
