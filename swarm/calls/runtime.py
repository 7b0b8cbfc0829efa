"""What a process needs to run nodes: settings, catalog, job store and the gateway client."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import openai

from swarm.calls.admission.base import AdmissionController, Unlimited
from swarm.calls.backend_health import BackendHealth
from swarm.calls.context_window import LearnedWindows
from swarm.calls.listeners import CallListener
from swarm.calls.local.kit import LocalKit
from swarm.calls.warmup import MemoryWarmup, WarmupGate
from swarm.catalog import Catalog
from swarm.settings import Settings
from swarm.store.base import JobStore
from swarm.store.heartbeat import LeaseKeeper

if TYPE_CHECKING:  # swarm.calls.hedging needs the Runtime's other parts at import time
    from swarm.calls.hedging.race import Hedger


@dataclass(frozen=True)
class Runtime:
    """Built once per worker process (or once by the embedded mode) and passed in."""

    settings: Settings
    catalog: Catalog
    store: JobStore
    client: openai.OpenAI
    listener: CallListener = field(default_factory=CallListener)
    """Hooks for metrics and counters (no-op by default)."""
    admission: AdmissionController = field(default_factory=Unlimited)
    """Per-model admission control (swarm.calls.admission); admits everything by default."""
    leases: LeaseKeeper | None = None
    """The worker process's heartbeat (swarm.store.heartbeat): call claims are leases it
    renews. None (the embedded mode): claims live ``visibility_timeout_s``."""
    hedger: Hedger | None = None
    """Hedged calls (swarm.calls.hedging), when SWARM_HEDGE_* turns them on; None = off."""
    backend_clients: Mapping[str, openai.OpenAI] = field(default_factory=dict)
    """Clients of the catalog's backends that have a base URL of their own; the others
    are called through ``client`` (SWARM_BASE_URL)."""

    health: BackendHealth = field(default_factory=BackendHealth)
    """Holds on the backends: empty balance, refused key, daily limit, outage
    (swarm.calls.backend_health); in this process only by default, in Redis in a worker."""
    windows: LearnedWindows = field(default_factory=LearnedWindows)
    """Context windows the gateway stated in context-length errors, per model."""
    local: LocalKit | None = None
    """Pacing, overtime, abandoned permits and adaptive limits of the catalog's local
    backends (swarm.calls.local.kit); None when the catalog has none (no call takes the
    local steps)."""
    warmup: WarmupGate = field(default_factory=MemoryWarmup)
    """Who warms a shared prompt prefix first (swarm.calls.warmup): in process by default,
    in the job store's Redis in a worker."""

    def client_for(self, backend: str) -> openai.OpenAI:
        """The client that calls the models of ``backend``."""
        return self.backend_clients.get(backend, self.client)
