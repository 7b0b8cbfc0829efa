"""The worker process's Runtime (built once from the environment, or installed by the
embedded mode), its task-thread count and its pool of node threads. Besides the Celery app
and the intake bootstep's counter (workers/intake.py), the worker's process-global state."""

from __future__ import annotations

import logging
import os
import threading

import redis

from swarm.calls import thread_share
from swarm.calls.admission import AdmissionController, AdmissionPolicy, Unlimited
from swarm.calls.admission.backend import BackendAdmission
from swarm.calls.admission.limits import key_prefix
from swarm.calls.admission.redis import RedisAdmission
from swarm.calls.backend_health import BackendHealth, HealthPolicy
from swarm.calls.context_window import SharedWindows
from swarm.calls.gateway import backend_clients, backend_endpoints, make_client
from swarm.calls.hedging import HedgePolicy, Hedger, LatencySketch
from swarm.calls.listeners import CallListener
from swarm.calls.local.kit import LocalKit, needs_kit
from swarm.calls.runtime import Runtime
from swarm.calls.warmup import RedisWarmup
from swarm.catalog import Catalog, load_catalog
from swarm.errors import ConfigError
from swarm.settings import Settings, load_settings
from swarm.store import RedisJobStore, gateways
from swarm.store.backend_holds import RedisBackendHolds
from swarm.store.connect import SentinelOptions, redis_client
from swarm.store.heartbeat import LeaseKeeper
from workers.allocator import Trimmer
from workers.metrics import SwarmMetrics
from workers.node_pool import NodePool

_lock = threading.Lock()
log = logging.getLogger(__name__)

_runtime: Runtime | None = None
_task_threads: int | None = None
_node_pool: NodePool | None = None
_trimmer: Trimmer | None = None
_registration: gateways.Registration | None = None
NODE_THREADS_PER_TASK_THREAD = 2
"""Node threads (batched tasks' calls) per task thread of the worker's pool."""
MIN_NODE_THREADS = 64
"""Fewest node threads of a process: calls in flight do not shrink with ``-c``."""


def install(runtime: Runtime | None) -> None:
    """Use ``runtime`` for this process's tasks (embedded mode, tests); None resets."""
    global _runtime
    with _lock:
        _runtime = runtime


def get() -> Runtime:
    """The process's Runtime, built from the environment on first use."""
    global _runtime
    with _lock:
        if _runtime is None:
            _runtime = from_settings(load_settings())
        return _runtime


def current() -> Runtime | None:
    """The process's Runtime if one is built or installed; never builds one."""
    with _lock:
        return _runtime


def set_task_threads(threads: int) -> None:
    """Record the worker pool's concurrency (``-c``), read when the worker starts."""
    global _task_threads
    with _lock:
        _task_threads = threads


def node_pool() -> NodePool:
    """Threads that run the nodes of batched tasks (swarm.jobs.batch), shared by the process.

    Their number (``node_threads``) bounds the calls a process has in flight; admission,
    not ``-c``, bounds them cluster-wide. Twice the task threads: a worker holds at most
    ``-c`` messages, and when a job's messages (about ten, swarm.jobs.fanout) split unevenly
    between workers one worker may hold more nodes than ``-c``; they still run at once. At
    least MIN_NODE_THREADS, so a worker with few task threads still keeps enough calls in
    flight to reach a model's rate limit. Not more by default: with very fast calls a worker
    is CPU-bound and every runnable thread costs, while one thread per task thread can run a
    job's nodes in two waves (ops/bench/results/README.md, Overhead). Threads start only
    when there is a node for them. Shared between jobs: a job holding more than its share
    gives threads to another job's waiting nodes (workers.node_pool).
    """
    global _node_pool
    with _lock:
        if _node_pool is None:
            settings = _runtime.settings if _runtime else None
            threads = _task_threads or (settings.worker_concurrency if settings else 32)
            configured = settings.node_threads if settings else None
            _node_pool = NodePool(node_threads(configured, threads))
            thread_share.install(_node_pool.gives_way)
        return _node_pool


def trimmer(every_s: float) -> Trimmer:
    """The process's allocator trimmer (workers.allocator), built on first use."""
    global _trimmer
    with _lock:
        if _trimmer is None:
            _trimmer = Trimmer(every_s)
        return _trimmer


def node_threads(configured: int | None, task_threads: int) -> int:
    """SWARM_NODE_THREADS if set, else max(2 x task threads, MIN_NODE_THREADS)."""
    if configured is not None:
        return configured
    return max(NODE_THREADS_PER_TASK_THREAD * task_threads, MIN_NODE_THREADS)


def from_settings(settings: Settings) -> Runtime:
    """A worker Runtime for a deployment with a broker and a real (or simulated) gateway."""
    if settings.base_url is None:
        raise ConfigError("workers need SWARM_BASE_URL (the gateway, or a `swarm sim` URL)")
    store_url = settings.backend_url()
    if store_url is None:
        raise ConfigError("workers need SWARM_BROKER_URL (embedded mode runs in the CLI)")
    key = settings.usable_key() or "no-key"
    catalog = load_catalog(settings.config)
    store = RedisJobStore.for_settings(settings, store_url)
    leases = LeaseKeeper(store, settings.lease_s)
    _register_gateway(_shared_client(settings, store_url), settings, leases)
    # what any worker learned of the gateway: context windows, token scales, speeds
    learned = _shared_client(settings, store_url)
    local = LocalKit.shared(settings, settings.base_url, learned) if needs_kit(catalog) else None
    admission = _admission(settings, catalog, store_url, settings.base_url, leases, local)
    return Runtime(
        settings=settings,
        catalog=catalog,
        store=store,
        leases=leases,
        client=make_client(settings, settings.base_url, key),
        # Prometheus metrics only when this process serves them (SWARM_METRICS_PORT).
        listener=SwarmMetrics(catalog, admission) if settings.metrics_port else CallListener(),
        admission=admission,
        hedger=_hedger(settings, catalog, store_url, settings.base_url, key),
        backend_clients=backend_clients(settings, catalog, os.environ),
        windows=SharedWindows(learned, f"{key_prefix(settings.base_url, 'learned')}:windows"),
        local=local,
        health=BackendHealth(RedisBackendHolds(learned), HealthPolicy.from_settings(settings)),
        warmup=RedisWarmup(learned, f"{key_prefix(settings.base_url, 'learned')}:"),
    )


def _shared_client(settings: Settings, redis_url: str) -> redis.Redis:
    """A client on the job store's Redis (plain or Sentinel) for the records beside it."""
    return redis_client(
        redis_url,
        SentinelOptions.from_settings(settings),
        socket_timeout=5,
        health_check_interval=30,
    )


def _register_gateway(client: redis.Redis, settings: Settings, leases: LeaseKeeper) -> None:
    """Tell producers which gateway this worker calls (its URL, never its key), for as long
    as its heartbeat beats (swarm.store.gateways); withdrawn at shutdown (withdraw_gateway)."""
    global _registration
    assert settings.base_url is not None
    registration = gateways.Registration(
        client, settings.base_url, settings.lease_s, gateways.worker_name()
    )
    try:
        registration.publish()
    except redis.RedisError as exc:  # the broker check reports Redis; this is advisory
        log.warning("cannot publish the gateway: %s", exc)
    leases.also(registration.renew)
    _registration = registration  # no _lock: get() holds it while it builds the runtime


def withdraw_gateway() -> None:
    """Remove this process's gateway registration (the worker is shutting down)."""
    global _registration
    registration, _registration = _registration, None
    if registration is not None:
        registration.withdraw()


def _hedger(
    settings: Settings, catalog: Catalog, redis_url: str, gateway: str, key: str
) -> Hedger | None:
    """Hedged calls when SWARM_HEDGE_* turn them on; the latency sketch shares Redis; a
    backend with a base URL of its own is hedged there."""
    if not HedgePolicy.from_settings(settings).enabled:
        return None
    client = _shared_client(settings, redis_url)
    endpoints = backend_endpoints(settings, catalog, os.environ)
    return Hedger(settings, gateway, key, LatencySketch(client, gateway), endpoints)


def _admission(
    settings: Settings,
    catalog: Catalog,
    redis_url: str,
    gateway: str,
    leases: LeaseKeeper,
    local: LocalKit | None,
) -> AdmissionController:
    """Per-model and per-backend admission shared through the job store's Redis, keyed on
    the gateway URL (adaptive backends' limits: the local kit's); the process's heartbeat
    renews the permits it holds."""
    if not settings.admission:
        return Unlimited()
    policy = AdmissionPolicy.from_settings(settings, renewed=True)
    models = RedisAdmission.from_url(
        redis_url, gateway, policy, SentinelOptions.from_settings(settings)
    )
    leases.also(models.keep_held)
    return BackendAdmission(models, catalog, local.adaptive if local else None)
