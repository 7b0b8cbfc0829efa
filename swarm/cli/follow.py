"""Waiting for a job from the CLI (`run`, `review`, `analyze`, `resume`, `status --watch`).

On a terminal, stderr shows the live view (swarm.cli.live_view) until the report exists;
piped, stderr gets a plain line (labelled counts, no ANSI) when the phase changes and at
most every PLAIN_EVERY_S otherwise. A job whose queue has no consuming worker after
IDLE_CHECK_S is said so once, on one line (waiting goes on). Ctrl-C stops the waiting, not
the job: the job id and the commands to follow or cancel it go to stderr, exit status 130.
In embedded mode the job runs in this process and Ctrl-C ends both at once (end_now).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

import click
from rich.console import Console
from rich.live import Live

from swarm.catalog import Catalog
from swarm.cli.decorators import INTERRUPTED
from swarm.cli.live_view import live_view
from swarm.cli.snapshot import JobSnapshot, plain_line, sub_agents, take_snapshot
from swarm.client.idle import waiting_stage
from swarm.errors import JobTimeoutError
from swarm.jobs.report import with_late_billing
from swarm.records import JobSpec
from swarm.store import JobStore

READ_EVERY_S = 0.25
"""The job store is read 4 times a second (a few round trips each time)."""
PLAIN_EVERY_S = 10.0
"""Piped, a line at least this far apart unless the phase changed."""
IDLE_CHECK_S = 5.0
"""How long a stage (sub-agents, aggregation) may wait for a worker before the queues are
checked for consumers."""

IdleCheck = Callable[[JobSpec, str], "str | None"]
"""Given a job and the stage that waits for a worker (``nodes``, ``aggregate``), one line
naming the queues no worker consumes (None when every queue has one)."""


@dataclass
class Watch:
    """A job to wait for: where its state is, and how to show it."""

    store: JobStore
    catalog: Catalog
    job_id: str
    embedded: bool = False
    """The job runs in this process: Ctrl-C ends it with the process."""
    idle_check: IdleCheck | None = None

    def report(self) -> dict[str, Any] | None:
        """The report with late billing (swarm.jobs.report.with_late_billing), once written."""
        report = self.store.report(self.job_id)
        if report is None:
            return None
        return with_late_billing(report, self.store.ledger(self.job_id), self.catalog)


def follow(watch: Watch, timeout_s: float | None, live: bool | None = None) -> dict[str, Any]:
    """Wait for the report while showing the job (``live``: on a terminal; default: when
    stderr is one); JobTimeoutError after ``timeout_s``; exits 130 on Ctrl-C."""
    console = Console(stderr=True)
    if (report := watch.report()) is not None:
        return report
    try:
        if live if live is not None else console.is_terminal:
            return _follow_live(watch, timeout_s, console)
        return _follow_plain(watch, timeout_s)
    except KeyboardInterrupt:
        interrupted(watch.job_id, watch.embedded)
        raise AssertionError("unreachable") from None  # pragma: no cover


def interrupted(job_id: str | None, embedded: bool) -> NoReturn:
    """Say what Ctrl-C left behind, then exit 130 (embedded: at once, see end_now)."""
    if embedded:
        ignore_ctrl_c()  # a second one would interrupt the line below, or end_now
        job = f"job {job_id}" if job_id else "the job"
        click.echo(
            f"\nswarm: interrupted; {job} ran inside this process (embedded mode) "
            "and stops with it",
            err=True,
        )
        end_now(INTERRUPTED)
    else:
        click.echo(
            f"\nswarm: stopped waiting; job {job_id} keeps running (Ctrl-C does not cancel "
            f"it)\n  follow it: swarm status {job_id} --watch\n  cancel it: swarm cancel "
            f"{job_id}",
            err=True,
        )
    sys.exit(INTERRUPTED)


def end_now(status: int) -> NoReturn:
    """End this process with ``status`` now, its embedded job with it.

    An embedded job's worker threads are in the middle of gateway calls and have queued
    work behind them; a normal interpreter exit joins them (ThreadPoolExecutor threads are
    joined at exit and drain their queues), which for a large job takes as long as the job,
    and meanwhile they log the errors of a worker whose runtime, simulator and executors are
    going away. Nothing of an embedded job outlives the process (its store, broker and
    simulator are in memory; temporary files are already unlinked), so the process ends
    here without running them: a second Ctrl-C meanwhile is ignored, stdout and stderr are
    flushed, and os._exit skips the joins.
    """
    ignore_ctrl_c()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing more to say
            stream.flush()
    os._exit(status)


def ignore_ctrl_c() -> None:
    """Ignore SIGINT from now on (this process is ending)."""
    with contextlib.suppress(ValueError):  # not the main thread: no handler to change
        signal.signal(signal.SIGINT, signal.SIG_IGN)


class _Reader:
    """Snapshots of one job, the idle check run once per waiting stage, and the deadline."""

    def __init__(self, watch: Watch, timeout_s: float | None) -> None:
        self.watch = watch
        self.spec = watch.store.spec(watch.job_id)
        self.started = time.monotonic()
        self.deadline = None if timeout_s is None else self.started + timeout_s
        self.timeout_s = timeout_s
        self._checked: set[str] = set()
        self._stage_since: tuple[str, float] = ("", self.started)

    def read(self) -> JobSnapshot:
        snap = take_snapshot(self.watch.store, self.watch.catalog, self.spec)
        self._check_idle(snap)
        late = self.deadline is not None and time.monotonic() > self.deadline
        if late and not snap.progress.finished:
            raise JobTimeoutError(
                f"job {self.watch.job_id} has no report after {self.timeout_s:.0f} s (it keeps "
                f"running: swarm status {self.watch.job_id} --watch)"
            )
        return snap

    def _check_idle(self, snap: JobSnapshot) -> None:
        stage = waiting_stage(snap.progress)
        now = time.monotonic()
        if stage != self._stage_since[0]:
            self._stage_since = (stage, now)
        check = self.watch.idle_check
        if not stage or check is None or stage in self._checked:
            return
        if now - self._stage_since[1] < IDLE_CHECK_S:
            return
        self._checked.add(stage)
        line = check(self.spec, stage)
        if line is not None:
            click.echo(f"swarm: {line}", err=True)


def _follow_live(watch: Watch, timeout_s: float | None, console: Console) -> dict[str, Any]:
    reader = _Reader(watch, timeout_s)
    snap = reader.read()
    with Live(live_view(snap), console=console, transient=True, auto_refresh=False) as live:
        while (report := watch.report()) is None:
            time.sleep(READ_EVERY_S)
            snap = reader.read()
            live.update(live_view(snap), refresh=True)
    return report


def _follow_plain(watch: Watch, timeout_s: float | None) -> dict[str, Any]:
    reader = _Reader(watch, timeout_s)
    stops = "ends it" if watch.embedded else "stops waiting, not the job"
    click.echo(
        f"swarm: waiting for job {watch.job_id} ({sub_agents(len(reader.spec.node_ids))}; "
        f"Ctrl-C {stops})",
        err=True,
    )
    last_phase, last_at = "", 0.0
    while (report := watch.report()) is None:
        snap = reader.read()
        now = time.monotonic()
        if snap.phase != last_phase or now - last_at >= PLAIN_EVERY_S:
            if not snap.progress.finished:
                click.echo(f"swarm: {plain_line(snap)}", err=True)
            last_phase, last_at = snap.phase, now
        time.sleep(READ_EVERY_S)
    return report
