"""Backend limits and the adaptive limit on the real redis-server, shared by two clients
(two worker processes) of one deployment."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner
from stack import local_catalog

from swarm.calls.admission import AdmissionPolicy, Outcome, Refusal
from swarm.calls.admission.backend import BackendAdmission, adaptive_cap
from swarm.calls.admission.base import Ask
from swarm.calls.admission.redis import RedisAdmission
from swarm.calls.local.adaptive import RedisAdaptive
from swarm.catalog import Catalog, load_catalog
from swarm.cli.main import main
from swarm.settings import Settings

pytestmark = pytest.mark.integration

GATEWAY = "http://gw.test/v1"


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(redis_url)
    c.flushdb()
    yield c
    c.close()


def controller(client: redis.Redis, catalog: Catalog) -> BackendAdmission:
    models = RedisAdmission(client, GATEWAY, AdmissionPolicy())
    return BackendAdmission(models, catalog, RedisAdaptive(client, models.adaptive_key))


@pytest.fixture
def local_config(tmp_path: Path) -> Path:
    """The packaged catalog with its backend declared local: one adaptive backend for all
    its models."""
    return local_catalog(tmp_path / "catalog-local.toml")


def test_the_adaptive_limit_is_shared_and_holds_every_model_of_the_backend(
    client: redis.Redis, local_config: Path
) -> None:
    catalog = load_catalog(local_config)
    one, two = controller(client, catalog), controller(client, catalog)
    kimi, flash = catalog.model("kimi-k2.5"), catalog.model("gemini-2.5-flash")
    backend = catalog.backends["default"]
    cap = adaptive_cap(catalog, backend)
    assert one.backend_spec(backend).max_inflight == cap  # a new backend starts at its cap
    first = one.acquire(kimi, Ask("j1", 10))
    assert first.permit is not None
    one.finish(kimi, first.permit, Outcome(used_tokens=0, failed=True, timed_out=True))
    state = RedisAdaptive(client, one.inner.adaptive_key).state("default", cap)  # type: ignore[attr-defined]
    assert state.samples == 1 and state.inflight_limit == 1  # a loss at one in flight
    held = two.acquire(flash, Ask("j1", 10, reserve_s=1.0))  # the other client reads it
    assert held.permit is not None, held
    refused = two.acquire(kimi, Ask("j1", 10, reserve_s=1.0))
    assert refused.permit is None and refused.reason is Refusal.INFLIGHT
    two.finish(flash, held.permit, Outcome(used_tokens=20))
    assert one.backend_counters(backend).inflight == 0


def test_status_models_shows_the_backends_in_flight_limit(
    redis_url: str, local_config: Path
) -> None:
    catalog = load_catalog(local_config)
    store_url = Settings(broker_url=redis_url).backend_url()  # where workers keep admission
    assert store_url is not None
    ctl = controller(redis.Redis.from_url(store_url), catalog)
    backend = catalog.backends["default"]
    permit = ctl.acquire(catalog.model("kimi-k2.5"), Ask("j1", 10)).permit
    assert permit is not None
    env = {"SWARM_BROKER_URL": redis_url, "SWARM_BASE_URL": GATEWAY,
           "SWARM_CONFIG": str(local_config)}  # fmt: skip
    result = CliRunner().invoke(main, ["status", "--models", "--json"], env=env)
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)
    assert shown["models"]["kimi-k2.5"]["inflight"] == 1
    row = shown["backends"]["default"]
    assert row["inflight"] == 1 and row["adaptive"] is True and row["kind"] == "local"
    assert row["limit"] == adaptive_cap(catalog, backend)
    table = CliRunner().invoke(main, ["status", "--models"], env=env)
    assert "admission per backend" in table.output and "default" in table.output
    hosted = {k: v for k, v in env.items() if k != "SWARM_CONFIG"}  # the packaged catalog
    result = CliRunner().invoke(main, ["status", "--models", "--json"], env=hosted)
    shown = json.loads(result.output)
    assert shown["backends"]["default"] == {"kind": "hosted", "adaptive": False, "limit": None}


def test_a_model_refusal_gives_the_backends_booked_rate_slot_back(client: redis.Redis) -> None:
    packaged = load_catalog()
    backend = packaged.backends["default"].model_copy(update={"rpm": 60, "max_inflight": 10})
    one_each = {"max_inflight": 1}
    models = {name: spec.model_copy(update=one_each) for name, spec in packaged.models.items()}
    catalog = packaged.model_copy(update={"backends": {"default": backend}, "models": models})
    ctl = controller(client, catalog)
    kimi, flash = catalog.model("kimi-k2.5"), catalog.model("gemini-2.5-flash")
    held = ctl.acquire(kimi, Ask("j1", 10, reserve_s=2.5))  # the backend's first slot (1 a second)
    assert held.permit is not None and held.start_in_s == 0.0
    refused = ctl.acquire(
        kimi, Ask("j1", 10, reserve_s=2.5)
    )  # the backend books, the model refuses
    assert refused.permit is None and refused.reason is Refusal.INFLIGHT
    booked = ctl.acquire(flash, Ask("j1", 10, reserve_s=2.5))  # the next slot is still the second
    assert booked.permit is not None
    assert 0.5 < booked.start_in_s < 1.5, booked  # (not the third: 2 s away)
