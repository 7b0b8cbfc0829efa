"""Backends with a base URL of their own get their own client and key."""

from __future__ import annotations

import dataclasses

from doubles import job_spec

from swarm.calls.gateway import backend_clients, backend_endpoints, make_client
from swarm.calls.hedging.race import Hedger
from swarm.calls.hedging.sketch import LatencySketch
from swarm.calls.pipeline import run_call
from swarm.calls.request import CallRequest
from swarm.calls.runtime import Runtime
from swarm.catalog import parse_catalog
from swarm.settings import Settings
from swarm.sim import SimConfig, start_in_thread
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


def test_a_hedged_call_goes_to_its_backends_own_url() -> None:
    with start_in_thread(SimConfig()) as main, start_in_thread(SimConfig(latency_ms=300)) as local:
        catalog = parse_catalog(CATALOG.replace("http://127.0.0.1:8080/v1", local.base_url))
        settings = Settings(base_url=main.base_url, api_key="k", hedge_after_s=0.05)
        endpoints = backend_endpoints(settings, catalog, {"LOCAL_KEY": "local-key"})
        hedger = Hedger(settings, main.base_url, "k", LatencySketch(None, main.base_url), endpoints)
        client = make_client(settings, main.base_url, "k")
        clients = backend_clients(settings, catalog, {})
        rt = Runtime(settings, catalog, MemoryJobStore(), client, hedger=hedger,
                     backend_clients=clients)  # fmt: skip
        rt.store.create_job(job_spec(1, job_id="j1"), ["hello"])
        request = CallRequest.of("j1", "n00", catalog.model("small"),
                                 [{"role": "user", "content": "hi"}], 16, hedge_cap=1)  # fmt: skip
        assert run_call(rt, request).ok
        assert local.stats()["requests"] == 2  # the original and its hedge
        assert main.stats()["requests"] == 0
