"""Backend limits and the adaptive limit on the real redis-server, shared by two clients
(two worker processes) of one deployment."""

from __future__ import annotations

import time
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import pytest
import redis

from swarm.calls.admission import AdmissionPolicy, Outcome, Refusal
from swarm.calls.admission.adaptive import RedisAdaptive
from swarm.calls.admission.backend import BackendAdmission
from swarm.calls.admission.redis import RedisAdmission
from swarm.catalog import Catalog, load_catalog

pytestmark = pytest.mark.integration

GATEWAY = "http://gw.test/v1"
PACKAGED = resources.files("swarm.data").joinpath("catalog.toml")


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(redis_url)
    c.flushdb()
    yield c
    c.close()


def controller(client: redis.Redis, catalog: Catalog) -> BackendAdmission:
    models = RedisAdmission(client, GATEWAY, AdmissionPolicy())
    return BackendAdmission(models, catalog, RedisAdaptive(client, models.adaptive_key))


def adaptive_catalog(folder: Path) -> Catalog:
    """The packaged catalog with one adaptive backend for all its models (a local server)."""
    path = folder / "catalog.toml"
    path.write_text(PACKAGED.read_text() + "\n[backends.default]\n")
    return load_catalog(path)


def test_the_adaptive_limit_is_shared_and_holds_every_model_of_the_backend(
    client: redis.Redis, tmp_path: Path
) -> None:
    catalog = adaptive_catalog(tmp_path)
    one, two = controller(client, catalog), controller(client, catalog)
    kimi, flash = catalog.model("kimi-k2.5"), catalog.model("gemini-2.5-flash")
    first = one.acquire(kimi, "j1", 10)
    assert first.permit is not None
    refused = two.acquire(flash, "j1", 10)  # a new backend starts at one call in flight
    assert refused.permit is None and refused.reason is Refusal.INFLIGHT
    one.finish(kimi, first.permit, Outcome(used_tokens=20))
    state = RedisAdaptive(client, one.inner.adaptive_key).state("default")  # type: ignore[attr-defined]
    assert state.samples == 1 and state.baseline_ms is not None and state.lone == 1
    backend = catalog.backends["default"]
    for _ in range(3):  # answered calls at the baseline grow the limit for every client
        decision = two.acquire(flash, "j1", 10, reserve_s=1.0)  # booked past rpm spacing
        assert decision.permit is not None, decision
        time.sleep(decision.start_in_s)
        permit = decision.permit
        two.finish(flash, permit, Outcome(used_tokens=20))
    assert RedisAdaptive(client, one.inner.adaptive_key).state("default").inflight_limit >= 2  # type: ignore[attr-defined]
    assert one.backend_counters(backend).inflight == 0
