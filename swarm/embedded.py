"""The embedded mode: broker, worker and (optionally) gateway inside this one process.

Celery's in-memory broker and cache result backend plus an in-process threads worker run the
very same tasks and chord as a deployment; the job store is in memory. `swarm demo`, `swarm
run --simulate` (swarm/cli/execute.py) and ``swarm.testing.embedded()`` (a user's own tests)
use it. This is the only module outside workers/ that imports workers/. One embedded swarm at
a time per process: the in-memory broker and the worker's runtime are the process's.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from celery import Celery
from celery._state import _set_task_join_will_block
from celery.contrib.testing.worker import TestWorkController, setup_app_for_worker
from celery.worker import state as worker_state
from kombu.exceptions import OperationalError

from swarm.calls.admission import AdmissionPolicy, MemoryAdmission
from swarm.calls.admission.backend import BackendAdmission
from swarm.calls.backend_health import BackendHealth, HealthPolicy
from swarm.calls.gateway import backend_clients, backend_endpoints, make_client
from swarm.calls.hedging import HedgePolicy, Hedger, LatencySketch
from swarm.calls.local.kit import LocalKit, needs_kit
from swarm.calls.runtime import Runtime
from swarm.catalog import Catalog
from swarm.client import SwarmClient
from swarm.settings import Settings
from swarm.sim import SimConfig, start_in_thread
from swarm.store import MemoryJobStore

DEMO_SIM = SimConfig(latency_p50_ms=300, latency_p99_ms=900, seed=7)
"""The simulated gateway of `swarm demo` and `swarm run --simulate`."""
log = logging.getLogger(__name__)
SIMULATED_KEY = "simulated"
"""The key sent to the built-in simulator (it asks for none)."""


@contextmanager
def simulated_gateway(config: SimConfig = DEMO_SIM) -> Iterator[str]:
    """Start the simulator on a free loopback port; yields its base URL."""
    with start_in_thread(config) as sim:
        yield sim.base_url


@contextmanager
def in_process_worker(app: Celery, concurrency: int, join_s: float | None) -> Iterator[None]:
    """A real worker (threads pool) on a daemon thread of this process.

    Celery's own ``start_worker`` always joins the worker on exit, which costs the 2 s
    drain timeout of its blocking loop; with ``join_s=None`` we only ask it to stop (the
    CLI exits right after, and nothing is left running by then).
    """
    _after_unjoined_worker()
    setup_app_for_worker(app, "WARNING", None)
    worker = TestWorkController(
        app=app,
        concurrency=concurrency,
        hostname="embedded@swarm",
        pool="threads",
        loglevel="WARNING",
        ready_callback=None,
        without_heartbeat=True,
        without_mingle=True,
        without_gossip=True,
    )
    thread = threading.Thread(target=worker.start, name="swarm-embedded-worker", daemon=True)
    thread.start()
    worker.ensure_started()
    try:
        yield
    finally:
        worker_state.should_terminate = 0
        # The threads pool marks the process as a task's (Celery then refuses any
        # AsyncResult.get() in it); the process is the caller's again once its worker stops.
        _set_task_join_will_block(False)
        if join_s is not None:
            thread.join(join_s)
            worker_state.should_terminate = None
        else:
            _UNJOINED.append(thread)


_UNJOINED: list[threading.Thread] = []
"""Workers asked to stop but not joined (``join_s=None``: a CLI that exits right after)."""


def _after_unjoined_worker(timeout_s: float = 30.0) -> None:
    """Before another in-process worker starts: wait for the workers asked to stop without a
    join (a CLI run inside a longer-lived process, e.g. a test's CliRunner), then clear
    Celery's per-process stop flag, which they left set: a worker started while it is set
    stops before it is ready, and ``ensure_started`` would wait forever."""
    while _UNJOINED:
        thread = _UNJOINED.pop()
        thread.join(timeout_s)
        log.debug("swarm: an unjoined in-process worker %s", "stopped" if not thread.is_alive()
                  else f"still runs after {timeout_s} s")  # fmt: skip
    worker_state.should_terminate = None


@contextmanager
def embedded_swarm(
    settings: Settings, catalog: Catalog, base_url: str, key: str, join_s: float | None = 30.0
) -> Iterator[SwarmClient]:
    """A SwarmClient whose tasks run on an in-process worker, calling ``base_url``.

    With ``join_s`` the worker is joined on exit and the tasks still queued (a watchdog's
    next check, say) are purged, so the next embedded swarm of the process starts empty;
    ``join_s=None`` only asks the worker to stop (a CLI process exits right after)."""
    from workers import process as worker_process
    from workers.factory import create_app

    logging.getLogger("celery").setLevel(logging.WARNING)
    app = create_app(settings, catalog)
    store = MemoryJobStore()
    models = MemoryAdmission(AdmissionPolicy.from_settings(settings))
    local = LocalKit.in_process(settings) if needs_kit(catalog) else None
    admission = BackendAdmission(models, catalog, local.adaptive if local else None)
    client = make_client(settings, base_url, key)
    # Against the built-in simulator every model is simulated, backends' own URLs too.
    simulated = base_url != settings.base_url
    clients = {} if simulated else backend_clients(settings, catalog, os.environ)
    endpoints = {} if simulated else backend_endpoints(settings, catalog, os.environ)
    hedger = None
    if HedgePolicy.from_settings(settings).enabled:  # the latency sketch stays in process
        hedger = Hedger(settings, base_url, key, LatencySketch(None, base_url), endpoints)
    runtime = Runtime(
        settings, catalog, store, client, admission=admission, hedger=hedger,
        backend_clients=clients, local=local,
        health=BackendHealth(policy=HealthPolicy.from_settings(settings)),
    )  # fmt: skip
    worker_process.install(runtime)
    try:
        with in_process_worker(app, settings.worker_concurrency, join_s):
            yield SwarmClient(settings, catalog, store, app, check_gateway=False)
    finally:
        # Without a join the worker's threads may still be running tasks, which read this
        # runtime: it stays installed (uninstalled, a task would build one from the
        # environment, for a deployment this process is not). The next install replaces it.
        if join_s is not None:  # the worker has stopped: nothing uses the app or the client
            worker_process.install(None)
            _purge(app)
            client.close()


def _purge(app: Celery) -> None:
    """Empty the in-memory broker's queues (shared by every app of the process)."""
    try:
        app.control.purge()
    except OperationalError:  # pragma: no cover  # the in-memory broker is always there
        logging.getLogger(__name__).debug("swarm embedded: purge failed", exc_info=True)
