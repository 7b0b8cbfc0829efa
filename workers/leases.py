"""The worker side of leases (swarm.store.leases).

A worker holds a lease on every sub-agent or aggregation message from the moment it
receives it (Celery's ``task_received``, in the consumer: a message prefetched but not yet
started is covered too) until its task ends; the process's heartbeat renews it. Every
worker process also sweeps for the lapsed leases of others (swarm.jobs.takeover).

A delivery takes the lease only when no live run holds it: a message delivered again while
its run goes on and renews its lease (the Redis broker's redelivery of a run slower than
the visibility timeout, RabbitMQ's after a lost connection) gets no lease, and its run ends
with Celery's ``Ignore`` as it starts: the live run does the work, and if it stops, its lease
lapses and a sweeper sends the message again. A run whose lease was taken over (it lapsed:
the process was frozen or cut off from Redis, and the message was sent again) ends
``Ignore``d too, before it starts or once it ends: it must not complete the chord member for
the run that took over while that run's nodes are still calling (the chord counts a task id
once, whoever finishes first).

Leases are kept per run, not per task id: one process may hold several deliveries of one
task id at once (a sweeper's re-send, a countdown copy, the broker's redelivery). The lease
taken on receipt travels in that delivery's request (``RECEIPT_TOKEN``) to its run, and the
run's lease lives on the run's task context until ``task_postrun`` releases it. A run that
ended, however, never releases a lease another run of the same id holds.

A run is released only once Celery recorded how it ended: a run whose body returned but
whose result Celery could not store (Redis unreachable right then) did not count its
chord member, so its lease lapses and a sweeper sends it again (the re-sent run returns
the stored envelopes and counts it); released, nothing would ever send it again.
"""

from __future__ import annotations

import heapq
import logging
import math
import os
import random
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from celery import Task, bootsteps, states
from celery.app.task import Context
from celery.exceptions import Ignore

from swarm.calls.runtime import Runtime
from swarm.errors import LeaseLostError
from swarm.jobs.lost_messages import probes_broker
from swarm.jobs.queueing import (
    AGGREGATE_TASK,
    BATCH_POLL_TASK,
    SUBAGENT_TASK,
    SUBAGENTS_TASK,
    WATCH_TASK,
)
from swarm.jobs.takeover import resend_signature, sweep, sweep_every_s
from swarm.settings import Settings
from swarm.store.leases import Lease, task_lease
from swarm.store.outages import STORE_OUTAGES
from workers import process

log = logging.getLogger(__name__)
LEASED_TASKS = frozenset(
    {SUBAGENT_TASK, SUBAGENTS_TASK, AGGREGATE_TASK, BATCH_POLL_TASK, WATCH_TASK}
)
"""Tasks whose messages are leased (the watch too: a worker killed while checking would
hold the job's watch chain until the visibility timeout)."""
KEPT_ON_REDIS = frozenset({WATCH_TASK})
"""Tasks whose message a sweeper sent stays held until a run leases it, on kombu's Redis
transport (swarm.jobs.takeover): the watch, whose message lost there nothing else sends."""


def kept_tasks(settings: Settings) -> frozenset[str]:
    """The tasks whose sent message a sweeper keeps held (``sweep``'s ``kept``): KEPT_ON_REDIS
    on kombu's Redis transport, none elsewhere (RabbitMQ loses no message a worker took)."""
    return KEPT_ON_REDIS if probes_broker(settings) else frozenset()


KILL_ON_RECEIPT = os.environ.get("SWARM_TEST_SIGKILL_ON_RECEIPT", "")
"""Tests only: the name of a leased task whose next run (``retries`` of 1 or more), once
received, SIGKILLs this worker before it is leased and after the run before it released
its lease (the window no lease covers: swarm.jobs.lost_messages)."""

KILL_BEFORE_RESEND = os.environ.get("SWARM_TEST_SIGKILL_BEFORE_RESEND", "")
"""Tests only: the name of a task whose message, once this process's sweeper took its lapse
(or due deferral) and before it sends it, SIGKILLs this worker (swarm.jobs.takeover)."""

RECEIPT_TOKEN = "swarm_lease_token"
"""Field added to a delivery's request on receipt: the fencing token of its lease (Celery
copies the request's fields onto the task context of that delivery's run only)."""
RUN_LEASE = "swarm_lease"
"""Attribute of a run's task context: the lease the run holds until ``on_postrun``."""
RECORDED = "swarm_recorded"
"""Attribute of a run's task context set on ``task_success``: Celery stored the result."""


def job_of(name: str, args: Any) -> str | None:
    """The job id in a leased task's arguments (the aggregation's comes after the results)."""
    if not isinstance(args, list | tuple) or not args:
        return None
    job_id = args[-1] if name == AGGREGATE_TASK else args[0]
    return job_id if isinstance(job_id, str) else None


def on_received(request: Any = None, **_: Any) -> None:
    """``task_received``: lease the message at once (a failure only leaves it to the broker)."""
    rt = process.current()
    if rt is None or rt.leases is None or request is None or request.name not in LEASED_TASKS:
        return
    job_id = job_of(str(request.name), request.args)
    if job_id is None:
        return
    if request.name == KILL_ON_RECEIPT and request.request_dict.get("retries"):
        _kill_unleased(rt, job_id, str(request.id))
    context = message_context(request)
    try:
        lease = _take(rt, job_id, str(request.id), request.task.signature_from_request(context))
    except STORE_OUTAGES as exc:
        log.debug("swarm: no lease for %s (%s); the broker redelivers it", request.id, exc)
        return
    if lease is not None:  # else a live run holds it: this delivery tries again as it starts
        request.request_dict[RECEIPT_TOKEN] = lease.token


def _kill_unleased(rt: Runtime, job_id: str, task_id: str) -> None:
    """Tests only (KILL_ON_RECEIPT): wait (5 s at most) until no run holds the task's lease,
    then SIGKILL this process, the message received and not leased."""
    deadline = time.monotonic() + 5.0
    while rt.store.held_tasks(job_id, [task_id]) and time.monotonic() < deadline:
        time.sleep(0.01)
    log.warning("swarm: SWARM_TEST_SIGKILL_ON_RECEIPT: killing this worker on %s", task_id)
    os.kill(os.getpid(), signal.SIGKILL)


def _kill_before_resend(signature: Any) -> None:
    """Tests only (KILL_BEFORE_RESEND): SIGKILL this process between a take and its send."""
    if signature.task == KILL_BEFORE_RESEND:
        log.warning("swarm: SWARM_TEST_SIGKILL_BEFORE_RESEND: killing this worker on %s", signature)
        os.kill(os.getpid(), signal.SIGKILL)


def message_context(request: Any) -> Context:
    """The task context a received request will run with (its headers, arguments, and the
    chord and callbacks embedded in its body), as Celery's tracer builds it."""
    _, _, embed = request._payload
    headers = {**request.request_dict, **(embed or {})}
    return Context(headers, args=request.args, kwargs=request.kwargs)


def _take(rt: Runtime, job_id: str, task_id: str, signature: Any) -> Lease | None:
    """A new lease on the task's message, held from now on; None when a live run holds it
    (this delivery duplicates that run's: swarm.store.claims, take_task_lease)."""
    assert rt.leases is not None
    lease = task_lease(job_id, task_id)
    if not rt.store.take_task_lease(lease, rt.leases.lease_s, resend_signature(signature)):
        log.debug("swarm: %s is leased by a live run; this delivery is its duplicate", task_id)
        return None
    rt.leases.hold(lease)
    return lease


@contextmanager
def held(task: Task, job_id: str) -> Iterator[Lease | None]:
    """The lease of ``task``'s message while the block runs (None without a heartbeat: the
    embedded mode); Ignore when another run took the message over. The lease is released
    by ``on_postrun``, once Celery has stored the result and counted the chord member: a
    worker killed between the two leaves a lease that lapses, not a message nobody resends."""
    rt = process.get()
    request = task.request
    if rt.leases is None or request.id is None:
        yield None
        return
    token = getattr(request, RECEIPT_TOKEN, None)
    if isinstance(token, str):  # taken when this delivery arrived
        lease: Lease | None = task_lease(job_id, str(request.id), token)
    else:  # arrived before the worker listened, with Redis down, or while a run held it
        lease = _take(rt, job_id, str(request.id), task.signature_from_request())
    if lease is None:  # a live run does this message's work; if it stops, its lease lapses
        raise Ignore()  # and a sweeper sends the message again
    setattr(request, RUN_LEASE, lease)  # on_postrun lets it go, however the run ends
    if _lost(rt, lease):  # taken over while it waited: the other run completes it
        _let_go(rt, request, lease)
        raise Ignore()
    try:
        yield lease
    except LeaseLostError:  # a call's claim lapsed while this process was stopped
        _let_go(rt, request, lease)  # not released: if it is still this run's, it lapses
        raise Ignore() from None  # and a sweeper sends the message again
    if _lost(rt, lease):
        _let_go(rt, request, lease)
        raise Ignore()


def run_lease(task: Task) -> Lease | None:
    """The lease of ``task``'s current run, handed over to the caller: ``on_postrun`` will
    neither renew nor release it (workers.deferral releases it as it defers the task)."""
    lease = getattr(task.request, RUN_LEASE, None)
    setattr(task.request, RUN_LEASE, None)
    return lease if isinstance(lease, Lease) else None


def _let_go(rt: Runtime, request: Context, lease: Lease) -> None:
    """Stop renewing the run's lease without releasing it (``on_postrun`` will not)."""
    assert rt.leases is not None
    setattr(request, RUN_LEASE, None)
    rt.leases.drop(lease)


def on_success(sender: Task | None = None, **_: Any) -> None:
    """``task_success``: Celery stored the run's result (and counted its chord member)."""
    if sender is not None:
        setattr(sender.request, RECORDED, True)


def on_postrun(task: Task | None = None, state: str | None = None, **_: Any) -> None:
    """``task_postrun``: how the run ended is recorded; release the run's own lease (a
    success whose result could not be stored keeps it, to lapse: see the module doc)."""
    request = getattr(task, "request", None)
    lease = getattr(request, RUN_LEASE, None)
    rt = process.current()
    if not isinstance(lease, Lease) or rt is None or rt.leases is None:
        return
    rt.leases.drop(lease)
    if state == states.SUCCESS and not getattr(request, RECORDED, False):
        log.debug("swarm: result of %s not stored; its lease lapses", lease.member)
        return
    _release(rt, lease)


def _lost(rt: Runtime, lease: Lease) -> bool:
    """True when ``lease`` lapsed or was taken over. Such a lease stays in the lapse index:
    a sweeper sends the message again if no other run has it yet."""
    assert rt.leases is not None
    if rt.store.renew_leases([lease], rt.leases.lease_s):
        log.debug("swarm: lease %s was lost; this run ends ignored", lease.member)
        return True
    return False


def _release(rt: Runtime, lease: Lease) -> None:
    try:
        rt.store.release_lease(lease)
    except STORE_OUTAGES as exc:  # it lapses; the re-sent message finds the work done
        log.debug("swarm: could not release lease %s (%s)", lease.member, exc)


WAKE_SLACK_S = 0.01
"""A sweeper woken for a deferred task sweeps this long after its due time."""
_sweeper: Sweeper | None = None
"""This process's sweeper (None in the embedded mode and outside workers)."""


def wake_sweeper_in(delay_s: float) -> None:
    """Make this process's sweeper sweep in ``delay_s`` (a task it deferred falls due)."""
    if _sweeper is not None:
        _sweeper.wake_in(delay_s)


class Sweeper:
    """The thread that sweeps the lapse index for one worker process: every
    ``sweep_every_s`` (jittered), and when a task this process deferred falls due."""

    def __init__(self, app: Any, rt: Runtime) -> None:
        self.app = app
        self.rt = rt
        self._stopped = False
        self._due: list[float] = []
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="swarm-sweeper", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()

    def wake_in(self, delay_s: float) -> None:
        with self._cond:
            heapq.heappush(self._due, time.monotonic() + max(delay_s, 0.0) + WAKE_SLACK_S)
            self._cond.notify()

    def _wait(self, until: float) -> bool:
        """Wait until ``until`` (monotonic) or an earlier due time; False once stopped."""
        with self._cond:
            while not self._stopped:
                now = time.monotonic()
                wake = min(until, self._due[0] if self._due else math.inf)
                if wake <= now:
                    while self._due and self._due[0] <= now:
                        heapq.heappop(self._due)
                    return True
                self._cond.wait(wake - now)
            return False

    def _run(self) -> None:
        lease_s = self.rt.settings.lease_s
        every_s = sweep_every_s(lease_s)
        hook = _kill_before_resend if KILL_BEFORE_RESEND else None
        kept = kept_tasks(self.rt.settings)
        # Spread the sweeps of workers started together over the interval.
        while self._wait(time.monotonic() + every_s * random.uniform(0.8, 1.2)):
            try:
                sweep(self.rt.store, self.app, lease_s, before_send=hook, kept=kept)
            except Exception as exc:  # Redis or the broker down: the next sweep tries again
                log.debug("swarm sweeper: sweep failed (%s)", exc)


class SweeperStep(bootsteps.StartStopStep):  # type: ignore[misc]  # celery is untyped
    """Worker bootstep: run a Sweeper while the worker runs (not in the embedded mode)."""

    def __init__(self, worker: Any, **kwargs: Any) -> None:
        super().__init__(worker, **kwargs)
        self.sweeper: Sweeper | None = None

    def start(self, worker: Any) -> None:
        rt = process.get()
        if rt.leases is None:
            return
        global _sweeper
        self.sweeper = _sweeper = Sweeper(worker.app, rt)
        self.sweeper.start()

    def stop(self, worker: Any) -> None:
        global _sweeper
        if self.sweeper is not None:
            self.sweeper.stop()
            _sweeper = None
