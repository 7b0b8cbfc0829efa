"""The hedge step: each request of a hedged attempt goes down the rest of the call's path
(admit, fence, http), the loser is withdrawn and its permit given back (in-process
simulator, memory store and admission)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import openai
import pytest
from doubles import job_spec

from swarm.calls.admission import AdmissionPolicy, MemoryAdmission
from swarm.calls.gateway import SwarmAsyncOpenAI, make_client
from swarm.calls.hedging.race import Hedger
from swarm.calls.hedging.sketch import LatencySketch
from swarm.calls.pipeline import run_call
from swarm.calls.request import CallRequest
from swarm.calls.runtime import Runtime
from swarm.catalog import parse_catalog
from swarm.settings import Settings
from swarm.sim import RunningSim, SimConfig, start_in_thread
from swarm.store import MemoryJobStore

CATALOG = """
[models.one]
gateway_name = "one"
queue = "llm.one"
input_per_mtok_usd = 1
output_per_mtok_usd = 1
cached_input_per_mtok_usd = 1
rpm = 1000
tpm = 1000000
max_inflight = {inflight}
context_window = 4096
max_tokens = 64

[routing]
default = ["one"]
aggregate = ["one"]
"""


@pytest.fixture
def sim() -> Iterator[RunningSim]:
    with start_in_thread(SimConfig(latency_ms=20)) as running:
        yield running


def runtime(sim: RunningSim, inflight: int) -> Runtime:
    settings = Settings(base_url=sim.base_url, api_key="k", hedge_after_s=0.2)
    catalog = parse_catalog(CATALOG.format(inflight=inflight))
    hedger = Hedger(settings, sim.base_url, "k", LatencySketch(None, sim.base_url))
    admission = MemoryAdmission(AdmissionPolicy())
    rt = Runtime(settings, catalog, MemoryJobStore(), make_client(settings, sim.base_url, "k"),
                 admission=admission, hedger=hedger)  # fmt: skip
    rt.store.create_job(job_spec(1, job_id="j1"), ["hello"])
    return rt


def straggler(rt: Runtime, straggle_ms: int) -> CallRequest:
    messages = [{"role": "user", "content": f"hi [[sim:straggle_ms={straggle_ms}]]"}]
    return CallRequest.of("j1", "n00", rt.catalog.model("one"), messages, 16, hedge_cap=1)


def settled(sim: RunningSim) -> dict[str, int]:
    """The simulator's counters once no request is in flight (a withdrawn one has ended)."""
    deadline = time.monotonic() + 10
    while (stats := sim.stats())["inflight"] and time.monotonic() < deadline:
        time.sleep(0.02)
    return stats


def test_a_hedge_that_answers_first_wins_and_the_original_is_withdrawn(sim: RunningSim) -> None:
    rt = runtime(sim, inflight=4)
    result = run_call(rt, straggler(rt, 5000))
    assert result.ok and result.attempts == 1
    stats = settled(sim)
    assert (stats["requests"], stats["cancelled"], stats["completed"]) == (2, 1, 1)
    assert rt.store.ledger("j1")["one"].calls == 1  # the winner only: the loser never answered
    hedges = rt.store.hedges("j1")
    assert (hedges.sent, hedges.won) == (1, 1)
    counters = rt.admission.counters(rt.catalog.model("one"))
    assert counters.admitted == 2 and counters.inflight == 0  # both permits went back


def test_a_hedge_goes_through_admission_and_is_not_sent_when_the_model_is_full(
    sim: RunningSim,
) -> None:
    rt = runtime(sim, inflight=1)  # the original holds the model's only permit
    result = run_call(rt, straggler(rt, 600))
    assert result.ok
    stats = settled(sim)
    assert (stats["requests"], stats["cancelled"]) == (1, 0)
    assert rt.store.hedges("j1").sent == 0  # refused by admission: not counted, not sent
    counters = rt.admission.counters(rt.catalog.model("one"))
    assert counters.admitted == 1 and counters.refused >= 1 and counters.inflight == 0


def test_a_hedges_client_is_the_gateways_async_twin(sim: RunningSim) -> None:
    rt = runtime(sim, inflight=4)
    assert run_call(rt, straggler(rt, 5000)).ok
    assert rt.hedger is not None
    (client,) = rt.hedger._clients.values()
    assert isinstance(client, SwarmAsyncOpenAI)
    assert client.max_retries == 0
    assert isinstance(client.default_headers["X-Stainless-Lang"], openai.Omit)
