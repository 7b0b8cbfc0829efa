"""Readiness: wait until every process of a batch is ready, failing fast when one exits.

A process is ready when its own check says so (a log line, an open port, an HTTP answer);
one that exits first fails the wait with the tail of its log, one that is not ready by the
deadline fails it too. The check is read after the exit state, so a process that printed its
line and then exited on purpose still counts as ready.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from swarm.errors import ProcessError

log = logging.getLogger(__name__)

POLL_S = 0.05
TAIL_LINES = 40


@dataclass(frozen=True)
class Readiness:
    """How to tell one started process is ready."""

    name: str
    ready: Callable[[], bool]
    """True once it is ready."""
    exit_code: Callable[[], int | None]
    """Its exit code once it exited, else None."""
    log: Path
    """Its log file, quoted when it fails."""


def read_log(path: Path, after: int = 0) -> str:
    """The log from byte ``after`` on (undecodable bytes replaced; a missing log is empty)."""
    try:
        with open(path, "rb") as f:
            f.seek(after)
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def log_tail(path: Path, lines: int = TAIL_LINES) -> str:
    """The last ``lines`` lines of the log."""
    return "\n".join(read_log(path).splitlines()[-lines:])


def wait_ready(batch: Sequence[Readiness], timeout_s: float, what: str = "ready") -> None:
    """Return once every process of ``batch`` is ready; ProcessError when one exits first or
    some are not ready after ``timeout_s`` (the message names them and quotes their logs)."""
    pending = list(batch)
    deadline = time.monotonic() + timeout_s
    while pending:
        for proc in list(pending):
            code = proc.exit_code()
            if proc.ready():
                pending.remove(proc)
            elif code is not None:
                raise ProcessError(
                    f"{proc.name} exited at start (exit code {code}) before it was {what}; "
                    f"log {proc.log}:\n{log_tail(proc.log)}"
                )
        if pending and time.monotonic() >= deadline:
            raise ProcessError(_late(pending, timeout_s, what))
        if pending:
            time.sleep(POLL_S)
    log.debug("%s: %s", what, [p.name for p in batch])


def _late(pending: Sequence[Readiness], timeout_s: float, what: str) -> str:
    names = ", ".join(p.name for p in pending)
    tails = "\n".join(f"==> {p.log} <==\n{log_tail(p.log)}" for p in pending)
    return f"not {what} after {timeout_s:g} s: {names}\n{tails}"
