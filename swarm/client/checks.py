"""The checks a client makes at the gateway before its jobs: the model list once (an
unreachable gateway, a refused key or a wrong base URL stops the first job before anything
is queued), the job's request shapes when asked (swarm.calls.preflight), whether the
running workers call another gateway; and the backends' holds a resume clears."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

from swarm.calls import preflight as gateway_preflight
from swarm.calls.gateway import make_client
from swarm.catalog import Catalog, ModelSpec
from swarm.client.setup import gateway_key
from swarm.settings import Settings
from swarm.store import JobStore, gateways
from swarm.store.backend_holds import RedisBackendHolds

log = logging.getLogger(__name__)


class GatewayChecks:
    """One client's gateway checks and what they remember: whether the model list is still
    to be checked, the (model, kind) shapes checked, and the checks' billed answers not yet
    counted in a job's ledger."""

    def __init__(
        self, settings: Settings, catalog: Catalog, store: JobStore, models: bool, shapes: bool
    ) -> None:
        self.settings, self.catalog, self.store = settings, catalog, store
        self.models_due = models
        """The model list is still to be checked (once per client)."""
        self.shapes = shapes
        """Check each job's request shapes before it is queued."""
        self._checked: set[tuple[str, str]] = set()
        self._bills: list[gateway_preflight.Bill] = []

    def models(self) -> None:
        """List the gateway's models once, unless not asked or without a base URL; warn
        (log) when the running workers all call another gateway."""
        base_url = self.settings.base_url
        if not self.models_due or base_url is None:
            return
        key = gateway_key(self.settings)
        openai_client = make_client(self.settings, base_url, key)
        try:
            gateway_preflight.check_gateway(
                openai_client, base_url, keyless=key == gateway_preflight.NO_KEY
            )
        finally:
            openai_client.close()
        self.models_due = False
        log.debug("swarm: gateway %s answered its model list", base_url)
        if (differs := self.mismatch(base_url)) is not None:
            log.warning("swarm: %s", differs)

    def requests(self, calls: Sequence[tuple[ModelSpec, str]], json_mode: bool) -> None:
        """Check (model, kind) pairs in their nodes' request shape, at most once each, when
        ``shapes`` is on; nothing without a base URL."""
        calls = [c for c in calls if (c[0].name, c[1]) not in self._checked]
        if not self.shapes or self.settings.base_url is None or not calls:
            return
        key = gateway_key(self.settings)
        self._bills += gateway_preflight.check_job_requests(
            self.settings, self.catalog, calls, key, os.environ, json_mode=json_mode
        )
        self._checked.update((model.name, kind) for model, kind in calls)

    def bill(self, job_id: str) -> None:
        """Count the checks' billed answers in the job's ledger (they were made for it)."""
        for call in gateway_preflight.billed_calls(self._bills):
            self.store.record_call(job_id, call)
        self._bills = []

    def mismatch(self, base_url: str) -> str | None:
        """One line when the running workers all call another gateway than ``base_url``
        (they publish theirs in the job store's Redis), else None."""
        redis_client = getattr(self.store, "redis", None)
        if redis_client is None:
            return None
        return gateways.mismatch(base_url, gateways.worker_gateways(redis_client))

    def release_backends(self) -> None:
        """Clear the holds on the catalog's backends (swarm.calls.backend_health)."""
        redis_client = getattr(self.store, "redis", None)
        if redis_client is None:
            return
        backends = sorted({spec.backend for spec in self.catalog.models.values()})
        RedisBackendHolds(redis_client).release(backends)
        log.debug("swarm: holds on backends %s cleared", ", ".join(backends))
