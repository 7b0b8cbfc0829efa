"""The worker's node threads, shared between jobs: a job holding more than its share gives
threads to another job's nodes waiting for one (swarm.calls.thread_share).

Nodes are submitted by a task thread inside ``for_job(job_id)``, so the pool knows each
node's job: the nodes waiting for a thread (queued) and those on a thread (running), per
job. A node of job J waiting for admission gives its thread away (``gives_way``) when:

- nodes of other jobs wait for a thread, more than the threads already promised to them
  (a thread given away runs the next queued node once its call has left it), and
- J runs more than ``threads / active jobs`` nodes (a job under its share keeps waiting).

A small job's nodes beside a large job's thus get threads within one poll of the large
job's waiters, and reach admission; with one job active nothing changes.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")


def gives_way(
    job: str | None,
    running: Mapping[str | None, int],
    queued: Mapping[str | None, int],
    promised: int,
    threads: int,
) -> bool:
    """Whether a node of ``job`` waiting for admission should give its thread away: other
    jobs' queued nodes exceed the threads ``promised`` them, and ``job`` runs more than its
    share (``threads`` over the jobs running or queued). A node of no known job never does."""
    if job is None:
        return False
    others = sum(n for name, n in queued.items() if name != job and n > 0)
    if others <= promised:
        return False
    active = {name for name, n in running.items() if n > 0}
    active |= {name for name, n in queued.items() if n > 0}
    active.add(job)
    return running.get(job, 0) > threads / len(active)


def _drop(counts: Counter[str | None], job: str | None) -> None:
    """One node fewer of ``job``; a job with none left leaves the counts (a long-lived
    worker sees many jobs, and ``gives_way`` reads every job counted)."""
    counts[job] -= 1
    if counts[job] <= 0:
        del counts[job]


class NodePool(ThreadPoolExecutor):
    """A thread pool that counts its nodes per job (see module docstring)."""

    def __init__(self, max_workers: int, thread_name_prefix: str = "node") -> None:
        super().__init__(max_workers=max_workers, thread_name_prefix=thread_name_prefix)
        self.threads = max_workers
        self._lock = threading.Lock()
        self._queued: Counter[str | None] = Counter()
        self._running: Counter[str | None] = Counter()
        self._promised = 0
        self._submitter = threading.local()
        """The job a task thread submits nodes for (``for_job``)."""
        self._node = threading.local()
        """The job of the node a node thread runs, and whether it gave its thread away."""

    @contextmanager
    def for_job(self, job_id: str) -> Iterator[None]:
        """Nodes submitted from this thread meanwhile are ``job_id``'s."""
        before = getattr(self._submitter, "job", None)
        self._submitter.job = job_id
        try:
            yield
        finally:
            self._submitter.job = before

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        """ThreadPoolExecutor's ``submit``, counted for the submitting thread's job."""
        job = getattr(self._submitter, "job", None)
        with self._lock:
            self._queued[job] += 1
        try:
            return super().submit(self._run, job, fn, *args, **kwargs)
        except BaseException:
            with self._lock:
                _drop(self._queued, job)
            raise

    def _run(self, job: str | None, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        with self._lock:
            _drop(self._queued, job)
            self._running[job] += 1
            if getattr(self._node, "gave", False):  # the thread promised runs a node now
                self._promised = max(0, self._promised - 1)
        self._node.job, self._node.gave = job, False
        try:
            return fn(*args, **kwargs)
        finally:
            with self._lock:
                _drop(self._running, job)
            self._node.job = None  # ``gave`` stays: the next node on this thread keeps the promise

    def gives_way(self) -> bool:
        """For the node running in this thread: True (a thread promised) when it should
        give its thread to another job's node (``gives_way``)."""
        job = getattr(self._node, "job", None)
        if job is None or self._node.gave:
            return False
        with self._lock:
            if not any(n > 0 for name, n in self._queued.items() if name != job):
                self._promised = 0  # every other job's node has a thread: nothing is owed
            if not gives_way(job, self._running, self._queued, self._promised, self.threads):
                return False
            self._promised += 1
        self._node.gave = True
        log.debug("node pool: a node of job %s gives its thread to another job's node", job)
        return True

    def counts(self) -> tuple[dict[str | None, int], dict[str | None, int], int]:
        """(running, queued) nodes per job and the threads promised, as now."""
        with self._lock:
            running = {job: n for job, n in self._running.items() if n}
            queued = {job: n for job, n in self._queued.items() if n}
            return running, queued, self._promised
