"""The adaptive in-flight limit: the arithmetic as a table, then against the simulator."""

from __future__ import annotations

import threading
from dataclasses import replace

import httpx2
import pytest

from swarm.calls.admission import AdmissionPolicy, MemoryAdmission
from swarm.calls.admission.backend import BackendAdmission
from swarm.calls.admission.base import Outcome
from swarm.calls.admission.gate import Gate
from swarm.calls.local.adaptive import AdaptiveParams, AdaptiveState, MemoryAdaptive, observe
from swarm.catalog import parse_catalog
from swarm.sim import SimConfig, start_in_thread

P = AdaptiveParams(max_limit=64)


def settle(one_slot: bool, steps: int = 200) -> AdaptiveState:
    """A job's first call alone, then calls made at the current limit from the cap on: a
    one-slot server answers n in flight in n times its service time, a parallel one in its
    service time."""
    state = observe(AdaptiveState.start(P.max_limit), 100.0, 1, P)
    for _ in range(steps):
        n = state.inflight_limit
        state = observe(state, 100.0 * (n if one_slot else 1), n, P)
    return state


def fed(points: list[tuple[int, float]], limit: float = 64.0) -> AdaptiveState:
    """The sums of ``(k, latency)`` points at ``limit`` (no limit moves while feeding)."""
    state = AdaptiveState(limit)
    for k, ms in points:
        state = replace(observe(state, ms, k, P), limit=limit)
    return state


SERIAL = [(1, 100.0), (2, 200.0), (3, 300.0), (4, 400.0)]
FLAT = [(1, 300.0), (5, 100.0), (9, 250.0), (3, 120.0), (7, 200.0)]


@pytest.mark.parametrize(
    ("state", "latency", "inflight", "limit_moves"),
    [
        (AdaptiveState.start(64), 100.0, 1, "still"),  # first call: nothing to fit yet
        (fed(SERIAL, 4.0), 500.0, 5, "down"),  # latency k times a lone call's: shrink
        (fed(SERIAL, 1.5), 100.0, 1, "still"),  # at the knee (1.5)
        (fed(SERIAL, 1.0), 100.0, 1, "up"),  # below the knee: towards 1.5
        (fed(FLAT, 4.0), 150.0, 4, "up"),  # latency does not follow k: grow
        (fed(FLAT, 4.0), 150.0, 1, "still"),  # limit unused: no growth
        (fed(FLAT, 64.0), 900.0, 40, "still"),  # a hosted gateway at its cap stays there
        (fed([(2, 200.0)] * 30, 2.0), 200.0, 2, "up"),  # always 2 in flight: probe a third
        # a one-slot server sent 20 at once from the cap: down from what is in use
        (fed([(1, 100.0), (2, 200.0)]), 1900.0, 20, "down"),
    ],
)
def test_one_observation_moves_the_limit(
    state: AdaptiveState, latency: float, inflight: int, limit_moves: str
) -> None:
    new = observe(state, latency, inflight, P)
    delta = new.limit - state.limit
    moved = "up" if delta > 1e-9 else "down" if delta < -1e-9 else "still"
    assert moved == limit_moves


def test_a_fast_simulator_slowed_by_the_clients_cpu_is_not_queueing() -> None:
    state = fed([(k, 50.0 + 0.3 * k) for k in range(1, 100, 7)])
    assert observe(state, 80.0, 100, P).limit == 64.0


def test_a_timeout_halves_the_limit_in_use() -> None:
    state = fed([(20, 30_000.0)] * 3)
    after = observe(state, 45_000.0, 20, P, timed_out=True)
    assert after.limit == 10.0
    assert after.w == state.w  # a timeout is no latency point
    assert observe(AdaptiveState(1.0), 0.0, 1, P, timed_out=True).limit == 1.0


def test_after_a_timeout_the_limit_creeps_back_towards_where_it_happened() -> None:
    state = observe(fed(FLAT, 2.0), 45_000.0, 2, P, timed_out=True)
    assert state.limit == 1.0 and state.ceiling == 2.0
    for _ in range(4):  # answers without queueing grow it, slowly near the loss
        state = observe(state, 150.0, 1, P)
    assert 1.0 < state.limit < 1.5
    far = observe(fed(FLAT, 8.0), 45_000.0, 8, P, timed_out=True)
    assert observe(far, 150.0, 4, P).limit >= 4.4  # far below it: at full speed


def test_the_limit_stays_within_one_and_the_cap() -> None:
    low = observe(fed(SERIAL, 1.0), 10_000.0, 2, P)
    assert low.limit >= 1.0
    high = fed(FLAT, 64.0)
    assert observe(high, 100.0, 64, P).limit == 64.0


def test_a_one_slot_server_settles_at_two_and_a_parallel_one_keeps_its_cap() -> None:
    one_slot = settle(one_slot=True)
    assert one_slot.inflight_limit in (1, 2)
    parallel = settle(one_slot=False)
    assert parallel.inflight_limit == 64
    # within a few answers, not a long ramp: a job's first calls on a one-slot server
    state = AdaptiveState.start(64)
    for n in range(1, 8):
        state = observe(state, 100.0 * n, n, P)
    assert state.inflight_limit <= 4


CATALOG = """
[backends.local]
kind = "local"
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


def test_two_models_on_one_local_backend_feed_one_adaptive_limit() -> None:
    catalog = parse_catalog(CATALOG)
    adaptive = MemoryAdaptive()
    ctl = BackendAdmission(MemoryAdmission(AdmissionPolicy()), catalog, adaptive)
    backend = catalog.backends["local"]
    seen: list[int] = []
    first_wave = threading.Barrier(4)
    with start_in_thread(SimConfig(latency_ms=400, slots=1)) as sim:
        url = f"{sim.base_url}/chat/completions"

        def worker(model: str) -> None:
            spec = catalog.model(model)
            with httpx2.Client() as http:  # a worker's pooled, open connection
                http.get(f"{sim.base_url}/models")
                for call in range(6):
                    gate = Gate(ctl, spec, "j1", 50, max_wait_s=60, max_countdown_s=60,
                                may_requeue=False)  # fmt: skip
                    permit = gate.acquire()
                    seen.append(ctl.backend_counters(backend).inflight)
                    if call == 0:  # the first wave: all four out before any is answered
                        first_wave.wait(timeout=60)
                    body = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
                    reply = http.post(url, json=body).json()
                    ctl.finish(spec, permit, Outcome(used_tokens=reply["usage"]["total_tokens"]))

        threads = [threading.Thread(target=worker, args=(m,)) for m in ("a", "b") * 2]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        stats = sim.stats()
    # Four callers, two model names, one server: every answer of either model is a sample
    # of the one backend's limit, and the backend's in-flight count is shared by both (the
    # backend starts at its cap, so the first wave has all four out; counted per model it
    # could not pass two). The first wave waits for all four permits: a caller whose thread
    # started late on a loaded machine would otherwise acquire after the first answers had
    # already moved the limit down. Where the limit settles for a one-slot server is pinned on
    # modelled latencies (test_a_one_slot_server_settles_at_two_...): measured on a loaded
    # machine's clock it is not a behaviour a test can hold.
    assert adaptive.state("local", 200).samples == 24
    assert stats["completed"] == 24
    assert len(seen) == 24 and max(seen) == 4
