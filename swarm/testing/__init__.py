"""Run swarm inside your own tests: broker, worker and gateway in this process.

    import swarm.testing

    def test_my_pipeline() -> None:
        with swarm.testing.embedded() as client:
            report = client.submit(["first", "second"], "Summarise").wait(timeout=60)
        assert report.status == "succeeded" and report.total == 2

``embedded()`` runs swarm's embedded mode (swarm/embedded.py, what `swarm demo` runs), as
``celery.contrib.testing.worker.start_worker`` and dramatiq's ``StubBroker`` are for those
libraries: Celery's in-memory broker and result backend, a real worker on threads of this
process running swarm's own tasks and chord, an in-memory job store and admission control,
and the built-in simulator as the gateway (``simulator=`` configures it, e.g. error rates
and 429s; ``base_url=`` calls a gateway of your own instead). No Redis, no network beyond
the loopback, no key. One at a time per process (the in-memory broker and the worker's
runtime are the process's).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from swarm.catalog import Catalog, load_catalog
from swarm.client import SwarmClient
from swarm.embedded import SIMULATED_KEY, embedded_swarm, simulated_gateway
from swarm.settings import Settings, load_settings
from swarm.sim import SimConfig

__all__ = ["SimConfig", "embedded", "simulated_gateway"]

TEST_WORKER_THREADS = 8
"""Threads of the in-process worker (enough for a test's jobs, light on a CI machine)."""


@contextmanager
def embedded(
    *,
    latency_ms: float = 0.0,
    simulator: SimConfig | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    settings: Settings | None = None,
    catalog: Catalog | None = None,
    join_s: float = 30.0,
    **overrides: Any,
) -> Iterator[SwarmClient]:
    """A SwarmClient whose jobs run in this process; everything stops on exit.

    ``latency_ms`` is the simulator's latency per call (0: answers at once); ``simulator``
    a whole SimConfig instead. ``base_url`` (and ``api_key``) make the worker call that
    gateway, not the simulator. ``settings`` default to the environment's SWARM_* with
    ``overrides`` over them (e.g. ``min_success_ratio=1.0``), and never a broker: the
    broker is in memory whatever SWARM_BROKER_URL says. ``catalog`` defaults to the one
    the settings name. On exit the worker is joined (at most ``join_s``) and the queued
    tasks purged.
    """
    settings = _embedded_settings(settings, overrides)
    catalog = catalog or load_catalog(settings.config)
    with ExitStack() as stack:
        if base_url is None:
            config = simulator or SimConfig(latency_ms=latency_ms)
            base_url, key = stack.enter_context(simulated_gateway(config)), SIMULATED_KEY
        else:
            key = api_key or settings.usable_key() or "no-key"
        yield stack.enter_context(embedded_swarm(settings, catalog, base_url, key, join_s))


def _embedded_settings(settings: Settings | None, overrides: dict[str, Any]) -> Settings:
    """The environment's settings (or ``settings``) with ``overrides``, and no broker."""
    base = dict(settings) if settings is not None else {}
    defaults = {"worker_concurrency": TEST_WORKER_THREADS}
    fields = {**defaults, **base, **overrides, "broker_url": None, "result_url": None}
    return load_settings(**fields)
