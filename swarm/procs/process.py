"""``Process``: one child in its own session, stdout and stderr in one log file.

The log is where readiness is read from (``wait_for_log``) and what a failure quotes. A
``Process`` is stopped by ``terminate`` (SIGTERM to its group, SIGKILL after the grace period)
or ``kill`` (SIGKILL at once: a crash), by its ``with`` block, or at the latest when the
interpreter exits, unless it was started with ``stop_at_exit=False`` (a stack that outlives
the command that started it).
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Self

from swarm.procs.groups import signal_group, stop_groups, wait_until
from swarm.procs.ready import Readiness, log_tail, read_log, wait_ready

log = logging.getLogger(__name__)

START_TIMEOUT_S = 60.0
GRACE_S = 10.0
_LIVE: set[Process] = set()  # strong references: an abandoned Process is still stopped


def unique_log(folder: Path, name: str) -> Path:
    """A new, empty ``<folder>/<name>.log`` (``<name>-2.log`` and so on when taken)."""
    folder.mkdir(parents=True, exist_ok=True)
    safe = re.sub(r"[^A-Za-z0-9_.@-]+", "_", name) or "proc"
    path, n = folder / f"{safe}.log", 1
    while path.exists():
        n += 1
        path = folder / f"{safe}-{n}.log"
    path.touch()
    return path


class Process:
    """A running child process in its own process group, logging to ``log_path``.

    ``env`` is laid over this process's environment (``inherit_env=False``: used alone);
    ``PYTHONUNBUFFERED=1`` is always set so Python children write their lines promptly.
    """

    def __init__(
        self,
        argv: Sequence[str | os.PathLike[str]],
        log_path: Path,
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        name: str | None = None,
        inherit_env: bool = True,
        stop_at_exit: bool = True,
    ) -> None:
        self.argv = [os.fspath(a) for a in argv]
        self.name = name or Path(self.argv[0]).name
        self.log_path = log_path
        full_env = {**(os.environ if inherit_env else {}), **(env or {}), "PYTHONUNBUFFERED": "1"}
        with open(log_path, "ab") as out:
            self.popen = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=full_env,
                cwd=cwd,
                start_new_session=True,  # its own group: stopping it stops its children
            )
        log.debug("started %s (pid %d), log %s", self.name, self.pid, log_path)
        if stop_at_exit:
            _LIVE.add(self)

    # -- state -------------------------------------------------------------------------------
    @property
    def pid(self) -> int:
        """Its pid, which is also its process group id."""
        return self.popen.pid

    @property
    def alive(self) -> bool:
        return self.popen.poll() is None

    @property
    def returncode(self) -> int | None:
        return self.popen.poll()

    def running(self) -> bool:
        """``groups.Leader``: True while it runs."""
        return self.alive

    def ours(self) -> bool:
        """``groups.Leader``: its pid cannot be reused while we hold its Popen unreaped, and a
        pid still in use as a group id is never handed out."""
        return True

    # -- logs --------------------------------------------------------------------------------
    def log_text(self, after: int = 0) -> str:
        return read_log(self.log_path, after)

    def log_tail(self, lines: int = 60) -> str:
        return log_tail(self.log_path, lines)

    # -- waits -------------------------------------------------------------------------------
    def readiness(self, ready: Callable[[], bool]) -> Readiness:
        """This process as one entry of a ``wait_ready`` batch."""
        return Readiness(self.name, ready, self.popen.poll, self.log_path)

    def wait_ready(self, ready: Callable[[], bool], timeout_s: float, what: str) -> None:
        """Wait until ``ready()``; ProcessError if it exits first or takes over ``timeout_s``."""
        wait_ready([self.readiness(ready)], timeout_s, what)

    def wait_for_log(
        self, pattern: str | re.Pattern[str], timeout_s: float = START_TIMEOUT_S, after: int = 0
    ) -> re.Match[str]:
        """Wait until ``pattern`` (a regex) shows in the log from byte ``after`` on."""
        rx = re.compile(pattern)
        found: list[re.Match[str]] = []

        def logged() -> bool:
            match = rx.search(self.log_text(after))
            found[:] = [match] if match else []
            return match is not None

        self.wait_ready(logged, timeout_s, f"logging {rx.pattern!r}")
        return found[0]

    # -- stopping ----------------------------------------------------------------------------
    def terminate(self, grace_s: float = GRACE_S) -> int | None:
        """SIGTERM the group, SIGKILL it after ``grace_s``; the exit code."""
        stop_groups([(self, signal.SIGTERM)], grace_s)
        return self._gone()

    def kill(self) -> int | None:
        """SIGKILL the whole group at once (a crash); the exit code."""
        signal_group(self.pid, signal.SIGKILL)
        wait_until(lambda: not self.alive, GRACE_S)
        return self._gone()

    def _gone(self) -> int | None:
        if not self.alive:
            signal_group(self.pid, signal.SIGKILL)  # no orphan of its group outlives it
        _LIVE.discard(self)
        return self.returncode

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.terminate()

    def __repr__(self) -> str:
        state = "alive" if self.alive else f"exited {self.returncode}"
        return f"<Process {self.name} pid={self.pid} {state} log={self.log_path}>"


def cleanup(folder: Path | None = None) -> list[Process]:
    """Kill every Process still running (only those logging under ``folder``, when given);
    the ones that were running."""
    root = folder.resolve() if folder is not None else None
    killed = []
    for proc in list(_LIVE):
        if root is not None and not proc.log_path.resolve().is_relative_to(root):
            continue
        if proc.alive:
            killed.append(proc)
        proc.kill()
    return killed


atexit.register(cleanup)
