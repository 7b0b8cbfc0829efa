"""Process groups: signal one, and stop several the way `docker stop` does.

A child started in its own session leads a process group whose id is its pid; signalling the
group reaches its children too (a prefork pool, a shell's background jobs). ``stop_groups``
sends each leader's stop signal, waits one grace period for all of them, then SIGKILLs every
group still there, including groups whose leader exited but left orphans behind.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

log = logging.getLogger(__name__)

POLL_S = 0.05
KILL_WAIT_S = 10.0
"""How long to wait for leaders to go after SIGKILL (they cannot refuse; they can be slow)."""


class Leader(Protocol):
    """The leader of a process group we started."""

    @property
    def pid(self) -> int:
        """Its pid, which is also its process group id."""
        ...

    def running(self) -> bool:
        """True while it runs (collecting its exit status when it is our child)."""
        ...

    def ours(self) -> bool:
        """True when signalling its group cannot reach a stranger's processes."""
        ...


L = TypeVar("L", bound=Leader)


def signal_group(pgid: int, sig: signal.Signals) -> None:
    """Send ``sig`` to process group ``pgid``; a group already gone is no error."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def stop_groups(leaders: Sequence[tuple[L, signal.Signals]], grace_s: float) -> list[L]:
    """Stop each group with its signal, SIGKILL what is left after ``grace_s``; the leaders
    that were still running."""
    running = [(leader, sig) for leader, sig in leaders if leader.running()]
    for leader, sig in running:
        signal_group(leader.pid, sig)
    stopped = [leader for leader, _ in running]
    if not wait_until(lambda: not any(p.running() for p in stopped), grace_s):
        log.debug("still running after %.1f s: %s", grace_s, [p.pid for p in stopped])
    for leader, _ in leaders:
        if leader.ours():  # stragglers, and orphans of a leader that already exited
            signal_group(leader.pid, signal.SIGKILL)
    wait_until(lambda: not any(p.running() for p, _ in leaders), KILL_WAIT_S)
    return stopped


def wait_until(done: Callable[[], bool], timeout_s: float) -> bool:
    """Poll ``done`` until it is true (True) or ``timeout_s`` passed (False)."""
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_S)
    return True
