"""Backends with a base URL of their own get their own client and key."""

from __future__ import annotations

import dataclasses

from swarm.calls.gateway import backend_clients
from swarm.calls.runtime import Runtime
from swarm.catalog import parse_catalog
from swarm.settings import Settings
from swarm.store import MemoryJobStore

CATALOG = """
[backends.local]
base_url = "http://127.0.0.1:8080/v1"
api_key_env = "LOCAL_KEY"

[backends.hosted]
max_inflight = 10

[models.small]
gateway_name = "small"
queue = "llm.small"
backend = "local"
input_per_mtok_usd = 0
output_per_mtok_usd = 0
cached_input_per_mtok_usd = 0
rpm = 100
tpm = 100000
max_inflight = 4
context_window = 4096
max_tokens = 256

[models.big]
gateway_name = "big"
queue = "llm.big"
backend = "hosted"
input_per_mtok_usd = 1
output_per_mtok_usd = 1
cached_input_per_mtok_usd = 1
rpm = 100
tpm = 100000
max_inflight = 4
context_window = 4096
max_tokens = 256

[routing]
default = ["small"]
aggregate = ["big"]
"""


def test_a_backend_with_its_own_url_is_called_with_its_own_client_and_key() -> None:
    settings = Settings(base_url="http://gw.test/v1", api_key="main-key")
    catalog = parse_catalog(CATALOG)
    clients = backend_clients(settings, catalog, {"LOCAL_KEY": "local-key"})
    assert set(clients) == {"local"}
    assert str(clients["local"].base_url) == "http://127.0.0.1:8080/v1/"
    assert clients["local"].api_key == "local-key"
    main = object()
    rt = Runtime(settings, catalog, MemoryJobStore(), main)  # type: ignore[arg-type]
    rt = dataclasses.replace(rt, backend_clients=clients)
    assert rt.client_for("local") is clients["local"]
    assert rt.client_for("hosted") is main
