"""The check before fan-out in the job's own shape: one small request per model of the
job, built by the request code its nodes use; a refused field stops the job with the
provider's message and the catalog line to change (swarm.calls.preflight)."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest
from doubles import MockGateway, completion

from swarm.calls.preflight import check_requests
from swarm.catalog import ModelSpec, load_catalog
from swarm.errors import ConfigError

MOONSHOT_400 = {
    "error": {
        "type": "invalid_request_error",
        "message": "invalid temperature: only 1 is allowed for this model",
    }
}


def moonshot(body: dict[str, Any], n: int) -> httpx2.Response:
    """A gateway holding kimi-k2.5's fixed sampling: any temperature but 1 is a 400."""
    if body.get("temperature", 1) != 1:
        return httpx2.Response(400, json=MOONSHOT_400)
    return completion("OK")


def plain_kimi() -> ModelSpec:
    """kimi-k2.5 as a catalog without the request-field keys has it (temperature 0.2)."""
    kimi = load_catalog().model("kimi-k2.5")
    return kimi.model_copy(update={"provider": None, "thinking": None, "thinking_by_kind": {}})


def test_a_refused_field_stops_the_job_naming_the_catalog_line() -> None:
    gw = MockGateway(moonshot)
    with pytest.raises(ConfigError) as info:
        check_requests([(plain_kimi(), "default")], lambda m: (gw.client(), "http://gw/v1"),
                       "/etc/swarm/catalog.toml")  # fmt: skip
    line = str(info.value)
    assert "invalid temperature: only 1 is allowed for this model" in line
    assert "HTTP 400" in line and '"temperature": 0.2' in line
    assert 'Change sampling (it sends temperature) in [models."kimi-k2.5"]' in line
    assert "/etc/swarm/catalog.toml" in line and "docs/providers.md" in line
    assert len(gw.requests) == 1 and gw.requests[0]["max_tokens"] == 16


def test_the_check_sends_each_models_shape_for_its_kind_once() -> None:
    gw = MockGateway(moonshot)
    kimi = load_catalog().model("kimi-k2.5")
    calls = [(kimi, "extract"), (kimi, "aggregate"), (kimi, "extract"), (kimi, "default")]
    check_requests(calls, lambda m: (gw.client(), "http://gw/v1"), "(packaged)")
    # default's body is aggregate's: one request per distinct shape
    assert [r["thinking"] for r in gw.requests] == [{"type": "disabled"}, {"type": "enabled"}]
    assert all("temperature" not in r for r in gw.requests)


def test_other_answers_pass_the_check() -> None:
    gw = MockGateway(lambda body, n: httpx2.Response(429, json={"error": {"message": "slow"}}))
    check_requests([(plain_kimi(), "default")], lambda m: (gw.client(), "http://gw/v1"), "x")
    assert len(gw.requests) == 1
