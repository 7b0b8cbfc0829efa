"""`up`/`down` on plain processes: down stops exactly what up started, whole process groups,
SIGKILL after the grace period; a process that dies at start fails `up` and leaves nothing."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from swarm.errors import StackError
from swarm.procs.groups import wait_until
from swarm.stack.plan import LocalProcess
from swarm.stack.runner import down, status, up
from swarm.stack.state import pid_exists, read_state

EXIT_WAIT_S = 60.0
"""A generous deadline for a signalled process to be gone (a condition, not a timing)."""


def _proc(name: str, script: str, wave: int = 0, grace_s: float = 5.0) -> LocalProcess:
    return LocalProcess(
        name=name, service=name, wave=wave, argv=("sh", "-c", script), env={},
        stop_grace_s=grace_s,
    )  # fmt: skip


def _children(pid: int) -> list[int]:
    tasks = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in tasks.read_text().split()] if tasks.exists() else []


def test_down_stops_process_groups_and_only_them(tmp_path: Path) -> None:
    bystander = os.spawnlp(os.P_NOWAIT, "sleep", "sleep", "30")
    try:
        state = up(
            [
                _proc("parent", "sleep 30 & sleep 30"),  # a grandchild in the same group
                _proc("stubborn", "trap '' TERM; sleep 30", wave=1, grace_s=0.5),
            ],
            tmp_path,
            tmp_path / "compose.yml",
            timeout_s=10,
        )
        assert [p.name for p in state.processes] == ["parent", "stubborn"]
        assert [running for _, running in status(tmp_path)] == [True, True]
        parent = state.processes[0].pid
        grandchildren = _children(parent)
        stopped = down(tmp_path)
        assert {p.name for p in stopped} == {"parent", "stubborn"}
        assert not [p.pid for p in state.processes if pid_exists(p.pid)]
        # A grandchild is init's orphan once its group is signalled: it exits when the kernel
        # gets to it, which a busy machine can delay; wait for that rather than sample once.
        assert wait_until(lambda: not any(pid_exists(pid) for pid in grandchildren), EXIT_WAIT_S)
        assert pid_exists(bystander)  # not ours: untouched
        assert read_state(tmp_path) is None and status(tmp_path) == []
        assert (tmp_path / "logs" / "parent.log").exists()
    finally:
        os.kill(bystander, signal.SIGKILL)
        os.waitpid(bystander, 0)


def test_a_process_dying_at_start_fails_up_and_stops_the_rest(tmp_path: Path) -> None:
    with pytest.raises(StackError, match="broken exited at start"):
        up(
            [_proc("fine", "sleep 30"), _proc("broken", "echo oops; exit 3", wave=1)],
            tmp_path,
            tmp_path / "compose.yml",
            timeout_s=10,
        )
    assert read_state(tmp_path) is None
