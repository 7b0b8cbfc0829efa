"""Signal listeners: build the Runtime as soon as a worker process starts, so a bad
configuration fails at start-up instead of at the first task; warn of gateways it has no
key for or that refuse its key (workers.keys); withdraw its gateway registration at
shutdown; serve its Prometheus metrics (SWARM_METRICS_PORT), trace when OTEL_* says so
(swarm.tracing), count the tasks in flight per model, trim the C allocator after tasks
(workers.allocator), and run tasks on the threads pool of workers.pool."""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

from celery import Task, signals

from swarm import tracing
from swarm.jobs.delayed_delivery import origin_queue
from swarm.jobs.queueing import AGGREGATE_TASK
from workers import keys, leases, metrics, pool, process

_connected = False
log = logging.getLogger(__name__)


def _start_tracing(**_: Any) -> None:
    """Traces when the OTEL_* environment configures them (swarm.tracing; off otherwise)."""
    tracing.setup("swarm-worker")


def _stop_tracing(**_: Any) -> None:
    """Export the spans still buffered before the process ends."""
    tracing.shutdown()


def _warm_runtime(**_: Any) -> None:
    process.get()


def _warn_missing_keys(**_: Any) -> None:
    """One WARNING per gateway called without the key it needs, then (on a thread of its
    own: a slow gateway does not hold up the start) one per gateway that refuses this
    worker's key or cannot be reached (workers.keys)."""
    rt = process.get()
    keys.warn_missing_keys(rt.settings, rt.catalog, os.environ)
    threading.Thread(
        target=keys.warn_refused_keys, args=(rt,), name="swarm-key-check", daemon=True
    ).start()


def _withdraw_gateway(**_: Any) -> None:
    """A worker shutting down is no longer one whose gateway producers compare theirs to."""
    process.withdraw_gateway()


def _record_threads(sender: Any = None, **_: Any) -> None:
    """The pool's concurrency (``-c`` or the setting) sizes the node pool (swarm.jobs.batch)."""
    threads = getattr(sender, "concurrency", None)
    if isinstance(threads, int) and threads > 0:
        process.set_task_threads(threads)


def _serve_metrics(**_: Any) -> None:
    """Start this worker's /metrics endpoint (main process; threads pool) when configured."""
    rt = process.get()
    found = metrics.find(rt.listener)
    if found is not None and rt.settings.metrics_port:
        found.serve(rt.settings.metrics_port)
        log.info("swarm metrics on :%d/metrics", rt.settings.metrics_port)


def _metrics() -> metrics.SwarmMetrics | None:
    rt = process.current()
    return None if rt is None else metrics.find(rt.listener)


def _queue(task: Task | None) -> str | None:
    info = getattr(getattr(task, "request", None), "delivery_info", None) or {}
    return origin_queue(info.get("routing_key"))  # a countdown's key starts with its delay


def _task_started(task: Task | None = None, **_: Any) -> None:
    found = _metrics()
    if found is not None:
        found.task_started(_queue(task))


def _task_ended(task: Task | None = None, **_: Any) -> None:
    found = _metrics()
    if found is not None:
        found.task_ended(_queue(task))


def _trim_allocator(task: Task | None = None, **_: Any) -> None:
    """After a task: the C allocator's freed memory back to the system, when due, and
    after every aggregation (a job's largest transient)."""
    rt = process.current()
    if rt is not None:
        ended = getattr(task, "name", None) == AGGREGATE_TASK
        process.trimmer(rt.settings.malloc_trim_s).maybe_trim(now_anyway=ended)


def connect() -> None:
    """Connect the listeners once per process."""
    global _connected
    if not _connected:
        signals.worker_init.connect(_start_tracing, weak=False)
        signals.worker_process_init.connect(_start_tracing, weak=False)
        signals.worker_shutdown.connect(_stop_tracing, weak=False)
        signals.worker_process_shutdown.connect(_stop_tracing, weak=False)
        signals.worker_init.connect(pool.use_for, weak=False)
        signals.worker_init.connect(_record_threads, weak=False)
        signals.worker_init.connect(_warm_runtime, weak=False)
        signals.worker_ready.connect(_warn_missing_keys, weak=False)
        signals.worker_init.connect(_serve_metrics, weak=False)
        signals.worker_shutdown.connect(_withdraw_gateway, weak=False)
        signals.worker_process_shutdown.connect(_withdraw_gateway, weak=False)
        signals.worker_process_init.connect(_warm_runtime, weak=False)
        signals.task_received.connect(leases.on_received, weak=False)
        signals.task_prerun.connect(_task_started, weak=False)
        signals.task_postrun.connect(_task_ended, weak=False)
        signals.task_success.connect(leases.on_success, weak=False)
        signals.task_postrun.connect(leases.on_postrun, weak=False)
        signals.task_postrun.connect(_trim_allocator, weak=False)
        _connected = True
