"""`swarm status --models` shows each model's token shares per tenant, read from the
admission keys in the deployment's Redis."""

from __future__ import annotations

import json

import pytest
import redis
from click.testing import CliRunner

from swarm.calls.admission import AdmissionPolicy, Outcome
from swarm.calls.admission.base import Ask
from swarm.calls.admission.redis import RedisAdmission
from swarm.calls.admission.shares import Tenant
from swarm.catalog import load_catalog
from swarm.cli.main import main
from swarm.settings import Settings

pytestmark = pytest.mark.integration

GATEWAY = "http://gw.test/v1"


def test_status_models_shows_the_tenants_shares(redis_url: str) -> None:
    store_url = Settings(broker_url=redis_url).backend_url()  # where workers keep admission
    assert store_url is not None
    client = redis.Redis.from_url(store_url)
    client.flushdb()
    ctl = RedisAdmission(client, GATEWAY, AdmissionPolicy())
    far = {"rps": None, "rpm": 6_000_000}  # the same keys, no spacing between the two calls
    model = load_catalog().model("kimi-k2.5").model_copy(update=far)
    for tenant, used in ((Tenant("team-a", 3.0), 3000), (Tenant("team-b"), 1000)):
        permit = ctl.acquire(model, Ask(f"job-{tenant.name}", 100, tenant=tenant)).permit
        assert permit is not None
        ctl.finish(model, permit, Outcome(used_tokens=used))
    env = {"SWARM_BROKER_URL": redis_url, "SWARM_BASE_URL": GATEWAY}
    result = CliRunner().invoke(main, ["status", "--models", "--json"], env=env)
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)["models"]["kimi-k2.5"]["tenants"]
    assert [(r["tenant"], r["weight"], r["target"]) for r in rows] == [
        ("team-a", 3.0, 0.75),
        ("team-b", 1.0, 0.25),
    ]
    assert rows[0]["share"] == pytest.approx(0.75, abs=0.01)
    assert json.loads(result.output)["models"]["gpt-4.1"]["tenants"] == []
    table = CliRunner().invoke(main, ["status", "--models"], env=env, terminal_width=200)
    assert "token shares per tenant" in table.output
    line = next(row for row in table.output.splitlines() if "kimi-k2.5 / team-a" in row)
    assert line.count("75.0%") == 2 and " 3 " in line  # share and weighted share, weight
