"""The local stack's state file: what `swarm stack up` started, so `down` stops exactly that.

Each process runs in its own session (process group == its pid). A pid alone can be reused
after a process exits, so the state also keeps the process's start time (Linux ``/proc``) and a
pid only counts as ours while both match. No command line is stored: commands carry passwords.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from swarm.errors import StackError

STATE_FILE = "state.json"


class ProcessState(BaseModel):
    """One started process."""

    model_config = ConfigDict(frozen=True)

    name: str
    """``<service>-<replica>``."""
    service: str
    """Its compose service."""
    wave: int
    """Start order (stopped in reverse)."""
    pid: int
    """Its pid, which is also its process group id."""
    start_ticks: int | None
    """Its start time in clock ticks since boot (``/proc/<pid>/stat``), None where unknown."""
    port: int | None
    """Local port it listens on."""
    metrics_port: int | None
    """Local Prometheus port (workers)."""
    log: str
    """Its log file (stdout and stderr)."""
    stop_signal: str
    """Signal that stops it."""
    stop_grace_s: float
    """Seconds before SIGKILL."""


class StackState(BaseModel):
    """Everything one `swarm stack up` started."""

    model_config = ConfigDict(frozen=True)

    compose_file: str
    """The compose file the processes come from."""
    started_at: float
    """Unix time of `up`."""
    processes: tuple[ProcessState, ...]
    """In start order."""


def state_path(run_dir: Path) -> Path:
    """Where the state of the stack in ``run_dir`` lives."""
    return run_dir / STATE_FILE


def read_state(run_dir: Path) -> StackState | None:
    """The stack's state, or None when nothing was started there."""
    path = state_path(run_dir)
    if not path.is_file():
        return None
    try:
        return StackState.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValidationError) as exc:
        raise StackError(f"unreadable stack state {path}: {exc}") from None


def write_state(run_dir: Path, state: StackState) -> None:
    """Replace the state file atomically."""
    path = state_path(run_dir)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state.model_dump(mode="json"), indent=2), encoding="utf-8")
    tmp.replace(path)


def remove_state(run_dir: Path) -> None:
    """Forget the stack (its logs stay)."""
    state_path(run_dir).unlink(missing_ok=True)


def new_state(compose_file: Path, processes: tuple[ProcessState, ...] = ()) -> StackState:
    """A state for processes started now."""
    return StackState(compose_file=str(compose_file), started_at=time.time(), processes=processes)


def start_ticks(pid: int) -> int | None:
    """Start time of ``pid`` in clock ticks since boot, or None without ``/proc``."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Field 2 (comm) may hold spaces and parentheses: split after its closing one.
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[19])


def _zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2 :].startswith("Z")


def pid_exists(pid: int) -> bool:
    """True when some process (not a zombie) has ``pid``."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _zombie(pid)


def alive(proc: ProcessState) -> bool:
    """True while ``proc`` is the same process we started and it has not exited."""
    if not pid_exists(proc.pid):
        return False
    return proc.start_ticks is None or start_ticks(proc.pid) == proc.start_ticks


def ours_or_gone(proc: ProcessState) -> bool:
    """True when signalling ``proc``'s group cannot hit a stranger: its leader is ours, or no
    process has that pid (Linux never hands out a pid still in use as a group id)."""
    return alive(proc) or not pid_exists(proc.pid)


def reap(pid: int) -> None:
    """Collect ``pid`` if it is our child (same-process `up` then `down`); no-op otherwise."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)
