"""A worker warns at start of each gateway it would call without the key it needs."""

from __future__ import annotations

import logging

import pytest

from swarm.catalog import parse_catalog
from swarm.settings import Settings
from workers.keys import missing_keys, needs_key, warn_missing_keys

MODEL = """
[models.{name}]
gateway_name = "{name}"
queue = "llm.{name}"
backend = "{backend}"
input_per_mtok_usd = 1
output_per_mtok_usd = 1
cached_input_per_mtok_usd = 1
rpm = 100
tpm = 100000
max_inflight = 4
context_window = 4096
max_tokens = 256
"""
CATALOG = (
    """
[backends.hosted]
max_inflight = 10

[backends.other]
base_url = "https://api.other.example/v1"
api_key_env = "OTHER_KEY"

[backends.llama]
base_url = "http://llama:8080/v1"
api_key_env = "LLAMA_KEY"
"""
    + MODEL.format(name="big", backend="hosted")
    + MODEL.format(name="far", backend="other")
    + MODEL.format(name="small", backend="llama")
    + """
[routing]
default = ["big"]
aggregate = ["big"]
"""
)


@pytest.mark.parametrize(
    ("url", "needed"),
    [
        ("https://api.moonshot.ai/v1", True),
        ("http://127.0.0.1:8000/v1", False),
        ("http://localhost:8000/v1", False),
        ("http://192.168.1.20:8080/v1", False),
        ("http://sim:8000/v1", False),  # a compose service
        ("http://gpu.internal:8000/v1", False),
    ],
)
def test_which_gateways_need_a_key(url: str, needed: bool) -> None:
    assert needs_key(url) is needed


def test_each_gateway_without_its_key_is_named_with_its_variable() -> None:
    catalog = parse_catalog(CATALOG)
    settings = Settings(base_url="https://api.moonshot.ai/v1")
    lines = missing_keys(settings, catalog, {})
    assert len(lines) == 2
    assert lines[0].startswith("no API key for https://api.moonshot.ai/v1 (models big): set ")
    assert "SWARM_API_KEY (or OPENAI_API_KEY)" in lines[0]
    assert "https://api.other.example/v1 (models far): set OTHER_KEY;" in lines[1]
    assert not any("llama" in line for line in lines)  # a compose service needs none
    keyed = Settings(base_url="https://api.moonshot.ai/v1", **{"SWARM_API_KEY": "sk-real"})
    assert missing_keys(keyed, catalog, {"OTHER_KEY": "k"}) == []
    placeholder = Settings(base_url="https://api.moonshot.ai/v1", **{"SWARM_API_KEY": "YOUR_KEY"})
    assert len(missing_keys(placeholder, catalog, {"OTHER_KEY": "k"})) == 1


def test_a_local_gateway_needs_no_key(caplog: pytest.LogCaptureFixture) -> None:
    catalog = parse_catalog(CATALOG)
    settings = Settings(base_url="http://127.0.0.1:8000/v1")
    with caplog.at_level(logging.WARNING, logger="workers.keys"):
        warn_missing_keys(settings, catalog, {"OTHER_KEY": "k"})
    assert caplog.records == []
    with caplog.at_level(logging.WARNING, logger="workers.keys"):
        warn_missing_keys(settings, catalog, {})
    assert [r.levelname for r in caplog.records] == ["WARNING"]
    assert "OTHER_KEY" in caplog.records[0].getMessage()
