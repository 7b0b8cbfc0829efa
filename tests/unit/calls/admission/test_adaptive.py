"""The adaptive in-flight limit: the arithmetic as a table, then against the simulator."""

from __future__ import annotations

import threading

import httpx2
import pytest

from swarm.calls.admission import AdmissionPolicy, MemoryAdmission
from swarm.calls.admission.adaptive import AdaptiveParams, AdaptiveState, MemoryAdaptive, observe
from swarm.calls.admission.backend import BackendAdmission
from swarm.calls.admission.base import Outcome
from swarm.calls.admission.gate import Gate
from swarm.catalog import parse_catalog
from swarm.sim import SimConfig, start_in_thread

P = AdaptiveParams(max_limit=64)


def settle(one_slot: bool, steps: int = 200) -> AdaptiveState:
    """Feed calls made at the current limit: a one-slot server answers n in flight in n
    times its service time, a parallel one in its service time."""
    state = AdaptiveState()
    for _ in range(steps):
        n = state.inflight_limit
        state = observe(state, 100.0 * (n if one_slot else 1), n, P)
    return state


@pytest.mark.parametrize(
    ("state", "latency", "inflight", "limit_moves"),
    [
        (AdaptiveState(), 100.0, 1, "still"),  # first call: its connection may be new
        (AdaptiveState(1.0, 100.0, 100.0, 1, 1), 100.0, 1, "up"),  # second lone call: grow
        (AdaptiveState(4.0, 100.0, 100.0, 9, 3), 100.0, 4, "up"),  # latency flat: grow
        (AdaptiveState(4.0, 100.0, 100.0, 9, 3), 100.0, 1, "still"),  # limit unused: no growth
        (AdaptiveState(4.0, 100.0, 400.0, 9, 3), 400.0, 4, "down"),  # queueing: shrink
        (AdaptiveState(2.0, 100.0, 200.0, 9, 3), 200.0, 2, "down"),  # one slot at 2: towards 1.5
        (AdaptiveState(1.5, 100.0, 150.0, 9, 3), 150.0, 2, "still"),  # one slot at 1.5: hold
        (AdaptiveState(1.0, None, None, 0), 100.0, 2, "still"),  # no baseline yet
    ],
)
def test_one_observation_moves_the_limit(
    state: AdaptiveState, latency: float, inflight: int, limit_moves: str
) -> None:
    new = observe(state, latency, inflight, P)
    delta = new.limit - state.limit
    moved = "up" if delta > 1e-9 else "down" if delta < -1e-9 else "still"
    assert moved == limit_moves


def test_the_limit_stays_within_one_and_the_cap() -> None:
    low = observe(AdaptiveState(1.0, 100.0, 10_000.0, 5, 3), 10_000.0, 2, P)
    assert low.limit >= 1.0
    high = AdaptiveState(64.0, 100.0, 100.0, 5, 3)
    assert observe(high, 100.0, 64, P).limit == 64.0


def test_a_one_slot_server_settles_at_two_and_a_parallel_one_grows() -> None:
    one_slot = settle(one_slot=True)
    assert one_slot.inflight_limit in (1, 2)
    parallel = settle(one_slot=False)
    assert parallel.inflight_limit == 64


CATALOG = """
[backends.local]
base_url = "http://127.0.0.1:1/v1"

[models.a]
gateway_name = "a"
queue = "llm.a"
backend = "local"
input_per_mtok_usd = 0
output_per_mtok_usd = 0
cached_input_per_mtok_usd = 0
rpm = 100000
tpm = 100000000
max_inflight = 100
context_window = 4096
max_tokens = 16

[models.b]
gateway_name = "b"
queue = "llm.b"
backend = "local"
input_per_mtok_usd = 0
output_per_mtok_usd = 0
cached_input_per_mtok_usd = 0
rpm = 100000
tpm = 100000000
max_inflight = 100
context_window = 4096
max_tokens = 16

[routing]
default = ["a"]
aggregate = ["b"]
"""


def test_against_a_one_slot_simulator_two_models_converge_to_one_or_two_in_flight() -> None:
    catalog = parse_catalog(CATALOG)
    adaptive = MemoryAdaptive()
    ctl = BackendAdmission(MemoryAdmission(AdmissionPolicy()), catalog, adaptive)
    backend = catalog.backends["local"]
    seen: list[int] = []
    with start_in_thread(SimConfig(latency_ms=400, slots=1)) as sim, httpx2.Client() as http:
        url = f"{sim.base_url}/chat/completions"

        def worker(model: str) -> None:
            spec = catalog.model(model)
            if True:
                for _ in range(6):
                    gate = Gate(ctl, spec, "j1", 50, max_wait_s=60, max_countdown_s=60,
                                may_requeue=False)  # fmt: skip
                    permit = gate.acquire()
                    seen.append(ctl.backend_counters(backend).inflight)
                    body = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
                    reply = http.post(url, json=body).json()
                    ctl.finish(spec, permit, Outcome(used_tokens=reply["usage"]["total_tokens"]))

        threads = [threading.Thread(target=worker, args=(m,)) for m in ("a", "b") * 2]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        stats = sim.stats()
    # Four callers, two model names, one server: after the first calls the backend holds
    # them to one or two in flight (a baseline inflated by the first connections may
    # leave it at three for a while), never to what the four could send.
    assert adaptive.state("local").samples == 24
    assert stats["completed"] == 24
    late = sorted(seen[len(seen) // 2 :])
    assert late[len(late) // 2] <= 2
    assert max(late) <= 3
