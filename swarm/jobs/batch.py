"""Several sub-agent nodes per task message: fewer messages, the same per-node results.

Celery spends more CPU per message (publish, task-sent event, receive, ack, result, chord
counter, task events) than the node's own gateway call, so a wide job with one node per
message spends most of its CPU on messages, and its last messages wait to be published and
picked up. A task carrying k nodes runs them concurrently on the worker's node threads,
and each node keeps everything it had as a task of its own: its claim and stored answer
(idempotency), its envelope and progress state, admission per call, and its own requeue
when admission asks a node to wait in the queue (only those nodes go back, the others are
done).

Which nodes go together is swarm.jobs.fanout's (the producer side); this module is the task's
work: read the nodes in one round trip, call them concurrently, report what to requeue.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Literal

from swarm import tracing
from swarm.calls.request import CallProgress
from swarm.calls.runtime import Runtime
from swarm.errors import RetryLater
from swarm.jobs.subagent import NodeCall, call_node, cancel_node
from swarm.records import JobSpec, NodeEnvelope
from swarm.store.leases import Lease

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BatchOutcome:
    """What one task with several nodes did."""

    envelopes: tuple[NodeEnvelope, ...]
    """Envelopes of the nodes that ended (ok or error), in the task's node order."""
    requeue: tuple[str, ...] = ()
    """Nodes that admission sends back to the queue (RetryLater)."""
    delay_s: float = 0.0
    """Shortest wait asked for by those nodes."""
    progress: Mapping[str, CallProgress] = field(default_factory=dict)
    """What the requeued calls did so far, per call slot (for their next run)."""


def run_nodes(
    rt: Runtime,
    job_id: str,
    node_ids: Sequence[str],
    *,
    may_requeue: bool = False,
    pool: Executor | None = None,
    on_node_done: Callable[[], None] | None = None,
    progress: Mapping[str, CallProgress] | None = None,
    fence: Lease | None = None,
    via: Mapping[str, Literal["live", "batch"]] | None = None,
) -> BatchOutcome:
    """Run (or reuse) the nodes of one task, their calls concurrently on ``pool`` (the
    worker's node threads; default: a thread per node for this call only).
    ``on_node_done`` is called once per node as it ends (or at once for a node that had
    already ended), from the thread that ran it. ``fence`` is the task's lease: lost, no
    envelope is stored (another run took the message over). ``via``: nodes whose answer a
    batch file stored (swarm.batch), as call_node's ``via``."""
    spec = rt.store.spec(job_id)
    loaded = rt.store.load_nodes(job_id, node_ids)
    done = {n: env for n, env in loaded.envelopes.items() if env.ok}
    todo = [n for n in node_ids if n not in done]
    if loaded.cancelled:
        done.update((n, cancel_node(rt, spec, n)) for n in todo)
        todo = []
    if on_node_done is not None:
        for _ in range(len(node_ids) - len(todo)):
            on_node_done()
    rt.store.mark_running_many(job_id, {n: spec.task(n).model for n in todo})
    requeue: dict[str, float] = {}
    carried: dict[str, CallProgress] = {}
    watch = _CancelWatch(rt, job_id)
    traced = tracing.capture()  # the task's span, for the node threads (None: not tracing)
    executor: AbstractContextManager[Executor] = (
        nullcontext(pool)
        if pool is not None
        else ThreadPoolExecutor(max_workers=max(len(todo), 1), thread_name_prefix="node")
    )
    with executor as run_on:
        futures = {
            n: run_on.submit(
                _node,
                watch,
                rt,
                spec,
                n,
                loaded.texts[n],
                NodeCall(may_requeue, progress or {}, fence, (via or {}).get(n, "live")),
                traced,
            )
            for n in todo
        }
        if on_node_done is not None:
            for future in futures.values():
                future.add_done_callback(lambda _ended: on_node_done())
        for node_id, future in futures.items():
            try:
                done[node_id] = future.result()
            except RetryLater as later:
                requeue[node_id] = later.delay_s
                carried.update(progress_of(later))
    return BatchOutcome(
        envelopes=tuple(done[n] for n in node_ids if n in done),
        requeue=tuple(requeue),
        delay_s=min(requeue.values(), default=0.0),
        progress=carried,
    )


CANCEL_RECHECK_S = 0.2
"""A batch reads the cancel flag again at most this often."""


class _CancelWatch:
    """Whether the batch's job was cancelled while its nodes waited for a node thread.

    The batch read the cancel flag when it loaded its nodes; a node that starts after
    another node of the batch ended (it waited for a thread) reads it again when the last
    read is CANCEL_RECHECK_S old, so a batch whose nodes all start at once reads nothing
    more, and short calls (a node ending every millisecond) do not cost a read each: after
    a cancel, nodes starting in the next CANCEL_RECHECK_S still call."""

    def __init__(self, rt: Runtime, job_id: str) -> None:
        self._rt = rt
        self._job_id = job_id
        self._lock = threading.Lock()
        self._ended = 0
        self._read_at = 0
        self._read_when = time.monotonic()
        self._cancelled = False

    def node_ended(self) -> None:
        with self._lock:
            self._ended += 1

    def cancelled(self) -> bool:
        now = time.monotonic()
        with self._lock:
            if self._cancelled or self._read_at == self._ended:
                return self._cancelled
            if now - self._read_when < CANCEL_RECHECK_S:
                return False
            self._read_at, self._read_when = self._ended, now
        cancelled = self._rt.store.cancelled(self._job_id)
        if cancelled:
            with self._lock:
                self._cancelled = True
        return cancelled


def _node(
    watch: _CancelWatch,
    rt: Runtime,
    spec: JobSpec,
    node_id: str,
    text: str,
    call: NodeCall,
    traced: object | None = None,
) -> NodeEnvelope:
    """One node of the batch on a node thread: cancelled without a call when the job was
    cancelled while it waited for the thread, else call_node (under the task's trace
    context, ``traced``, when tracing)."""
    try:
        if watch.cancelled():
            log.debug("job %s node %s: cancelled while waiting for a thread", spec.job_id, node_id)
            return cancel_node(rt, spec, node_id)
        with tracing.attached(traced):
            return call_node(rt, spec, node_id, text, call)
    finally:
        watch.node_ended()


def progress_of(later: RetryLater) -> dict[str, CallProgress]:
    """The progress a requeued call carries to its next run, by slot."""
    if later.slot is None:
        return {}
    return {later.slot: CallProgress(later.attempts, later.started_at)}
