"""Pipelines of many threads sent as one: group commit for the job store's writes.

A worker runs a hundred node threads; with fast answers each node's two store round trips
(its claim, its envelope) are a good share of its CPU, and each blocking socket call hands
Python's GIL to another runnable thread and back. Sent together, the writes of many
threads cost one round trip and one hand-off (the figures:
ops/bench/results/hosted_speed_cpu.md).

The first thread to write while no batch is in flight leads: it sends the commands of every
write queued by then (its own included) in one pipeline and hands each writer its own
replies; writers that arrive meanwhile queue and wait, and the first of them leads the
next batch. A thread alone (slow answers, few threads) sends its write at once, as before.
Hand-written: redis-py pipelines one caller's commands, not those of concurrent callers.
A build runs on the leading thread and must not write through the same group (it would
wait for its own batch).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from redis.exceptions import DataError

log = logging.getLogger(__name__)

Build = Callable[[Any], object]
"""Adds one write's commands to a redis-py pipeline."""
SendPipeline = Callable[[Build], list[Any]]
"""Sends the commands a build adds, as one pipeline: their replies, errors as replies."""


class _Write:
    """One thread's write: its commands, then its replies or the error that lost them."""

    __slots__ = ("_ready", "build", "error", "leads", "replies")

    def __init__(self, build: Build) -> None:
        self.build = build
        self.replies: list[Any] | None = None
        self.error: BaseException | None = None
        self.leads = False
        """Set when this write is to lead the next batch instead of being sent by one."""
        self._ready = threading.Lock()
        self._ready.acquire()

    def wait(self) -> None:
        self._ready.acquire()

    def wake(self) -> None:
        self._ready.release()

    def outcome(self) -> list[Any]:
        if self.error is not None:
            raise self.error
        assert self.replies is not None
        return self.replies


class GroupCommit:
    """Writes of concurrent threads sent together by ``send`` (see the module docstring)."""

    def __init__(self, send: SendPipeline) -> None:
        self._send = send
        self._lock = threading.Lock()
        self._queue: list[_Write] = []
        self._leading = False

    def write(self, build: Build) -> list[Any]:
        """The replies of the commands ``build`` adds (a command's error is its reply); an
        error that lost the whole batch (the connection) is raised."""
        write = _Write(build)
        with self._lock:
            self._queue.append(write)
            leads = not self._leading
            self._leading = True
        if not leads:
            try:
                write.wait()
            except BaseException:  # interrupted while queued (Ctrl-C on the main thread)
                if self._withdraw(write):
                    raise
                self._lead(write)  # chosen to lead meanwhile: the others must not wait on
                raise
            if not write.leads:
                return write.outcome()
        self._lead(write)
        return write.outcome()

    def _withdraw(self, write: _Write) -> bool:
        """Takes a queued write out (True), unless it was chosen to lead the next batch."""
        with self._lock:
            if write.leads:
                return False
            if write in self._queue:
                self._queue.remove(write)
            return True

    def _lead(self, own: _Write) -> None:
        with self._lock:
            batch, self._queue = self._queue, []
        try:
            self._flush(batch)
        finally:
            with self._lock:
                following = self._queue[0] if self._queue else None
                self._leading = following is not None
                if following is not None:
                    following.leads = True  # under the lock: see _withdraw
            for write in batch:
                if write.replies is None and write.error is None:  # the flush was cut short
                    write.error = RuntimeError("a batched store write was interrupted")
            for write in batch:
                if write is not own:
                    write.wake()
            if following is not None:
                following.wake()

    def _flush(self, batch: list[_Write]) -> None:
        spans: list[tuple[_Write, int, int]] = []

        def build(pipe: Any) -> None:
            for write in batch:
                start = len(pipe.command_stack)
                try:
                    write.build(pipe)
                except Exception as exc:  # that write's own mistake: the others still go
                    del pipe.command_stack[start:]
                    write.error = exc
                    continue
                spans.append((write, start, len(pipe.command_stack)))

        if len(batch) > 1:
            log.debug("swarm store: %d writes in one round trip", len(batch))
        try:
            replies = self._send(build)
        except Exception as exc:
            # A value Redis cannot take (None, a bool), refused before anything was sent:
            # one write's mistake, so each is sent alone and only that one fails.
            alone = isinstance(exc, DataError) and len(spans) > 1
            for write, _, _ in spans:
                if not alone:
                    write.error = exc
                    continue
                try:
                    write.replies = self._send(write.build)
                except Exception as own:
                    write.error = own
            return
        for write, start, end in spans:
            write.replies = replies[start:end]
