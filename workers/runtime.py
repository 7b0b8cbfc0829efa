"""The worker process's Runtime: built once from the environment, or installed by the
embedded mode. This module holds the only process-global state of the worker side."""

from __future__ import annotations

import threading

from swarm.admission import AdmissionController, AdmissionPolicy, Unlimited
from swarm.admission.redis import RedisAdmission
from swarm.catalog import load_catalog
from swarm.errors import ConfigError
from swarm.events import CallListener
from swarm.llm import make_client
from swarm.runtime import Runtime
from swarm.settings import Settings, load_settings
from swarm.store import RedisJobStore
from workers.metrics import SwarmMetrics

_lock = threading.Lock()
_runtime: Runtime | None = None


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


def from_settings(settings: Settings) -> Runtime:
    """A worker Runtime for a deployment with a broker and a real (or simulated) gateway."""
    if settings.base_url is None:
        raise ConfigError("workers need SWARM_BASE_URL (the gateway, or a `swarm sim` URL)")
    store_url = settings.backend_url()
    if store_url is None:
        raise ConfigError("workers need SWARM_BROKER_URL (embedded mode runs in the CLI)")
    key = settings.usable_key() or "no-key"
    catalog = load_catalog(settings.config)
    return Runtime(
        settings=settings,
        catalog=catalog,
        store=RedisJobStore.from_url(store_url, settings.result_expires_s),
        client=make_client(settings, settings.base_url, key),
        # Prometheus metrics only when this process serves them (SWARM_METRICS_PORT).
        listener=SwarmMetrics(catalog) if settings.metrics_port else CallListener(),
        admission=_admission(settings, store_url, settings.base_url),
    )


def _admission(settings: Settings, redis_url: str, gateway: str) -> AdmissionController:
    """Per-model admission shared through the job store's Redis, keyed on the gateway URL."""
    if not settings.admission:
        return Unlimited()
    return RedisAdmission.from_url(redis_url, gateway, AdmissionPolicy.from_settings(settings))
