"""The billing half of the job stores (Lua scripts on a real redis-server, and the memory
store), one behaviour for both: exactly-once ledger, stored answers, budget, claims."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
import redis

from swarm.records import JobSpec, NodeEnvelope, Usage
from swarm.store import JobStore, MemoryJobStore, RedisJobStore
from swarm.store.billing import BilledCall, HeldAnswer, StoredAnswer
from swarm.store.leases import claim_lease, task_lease


@pytest.fixture(params=["memory", "redis"])
def store(request: pytest.FixtureRequest) -> Iterator[JobStore]:
    if request.param == "memory":
        yield MemoryJobStore()
        return
    url = request.getfixturevalue("redis_url")
    client = redis.Redis.from_url(url, decode_responses=True)
    try:
        yield RedisJobStore(client, ttl_s=60)
    finally:
        client.close()


def job(store: JobStore, budget_usd: float | None = None) -> JobSpec:
    spec = JobSpec(
        job_id="b1",
        instruction="i",
        aggregate_instruction="a",
        model="m",
        aggregate_model="m",
        node_ids=("n0", "n1"),
        input_refs=("r0", "r1"),
        submitted_at=time.time(),
        budget_usd=budget_usd,
    )
    store.create_job(spec, ["a", "b"])
    return spec


def call(call_id: str, cost: int, key: str | None = None, text: str = "x") -> BilledCall:
    usage = Usage(prompt_tokens=100, completion_tokens=10, cached_tokens=40, reasoning_tokens=4)
    answer = StoredAnswer(content=text, usage=usage, finish_reason="stop") if key else None
    return BilledCall(
        call_id=call_id, model="m", usage=usage, cost_nusd=cost, answer_key=key, answer=answer
    )


def test_each_billed_call_counts_once_and_the_first_answer_wins(store: JobStore) -> None:
    job(store)
    assert store.record_call("b1", call("c1", 500, key="k", text="first"))
    assert not store.record_call("b1", call("c1", 500, key="k"))  # a retried write
    assert store.record_call("b1", call("c2", 300, key="k", text="second"))
    assert store.record_call("b1", call("c3", 200))  # billed, no usable answer
    line = store.ledger("b1")["m"]
    assert line.calls == 3
    assert line.usage == Usage(
        prompt_tokens=300, completion_tokens=30, cached_tokens=120, reasoning_tokens=12
    )
    assert store.budget("b1").spent_nusd == 1000
    stored = store.answer("b1", "k")
    assert stored is not None and stored.content == "first" and store.answer("b1", "j") is None


def test_reservations_against_the_cap(store: JobStore) -> None:
    job(store, budget_usd=1e-6)  # 1,000 nano-USD
    assert store.budget("b1").cap_nusd == 1000
    assert store.reserve("b1", "a", 600)
    assert store.reserve("b1", "a", 600)  # the same reservation again: nothing more
    assert store.budget("b1").reserved_nusd == 600
    assert not store.reserve("b1", "b", 500)  # 600 + 500 > 1,000: refused, now exhausted
    assert store.budget("b1").exhausted
    assert not store.reserve("b1", "c", 1)  # every later node is refused
    store.record_call("b1", call("c1", 550))
    store.release("b1", "a")
    store.release("b1", "a")
    state = store.budget("b1")
    assert (state.spent_nusd, state.reserved_nusd, state.left_nusd) == (550, 0, 450)
    assert not store.reserve("b1", "agg", 451, closing=True)
    assert store.reserve("b1", "agg", 450, closing=True)  # the aggregation uses what is left


def test_no_budget_reserves_everything(store: JobStore) -> None:
    job(store)
    assert store.reserve("b1", "a", 10**15) and store.budget("b1").cap_nusd is None


def test_claims_are_exclusive_until_released_or_expired(store: JobStore) -> None:
    job(store)
    assert store.claim("b1", "n0", "me", 30)
    assert store.claim("b1", "n0", "me", 30)
    assert not store.claim("b1", "n0", "you", 30)
    store.unclaim("b1", "n0", "you")  # not yours: no effect
    assert not store.claim("b1", "n0", "you", 30)
    store.unclaim("b1", "n0", "me")
    assert store.claim("b1", "n0", "you", 0.2)
    time.sleep(0.3)
    assert store.claim("b1", "n0", "me", 30)  # the holder died: its claim expired


def test_one_claim_among_racing_runs(store: JobStore) -> None:
    job(store)
    won: list[str] = []
    barrier = threading.Barrier(8)

    def race(owner: str) -> None:
        barrier.wait()
        if store.claim("b1", "n1", owner, 30):
            won.append(owner)

    threads = [threading.Thread(target=race, args=(f"o{i}",)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(won) == 1


def test_reopen_resets_report_cap_and_reservations(store: JobStore) -> None:
    spec = job(store, budget_usd=1e-6)
    store.record_call("b1", call("c1", 900))
    assert store.reserve("b1", "a", 100)
    assert not store.reserve("b1", "b", 1)
    store.cancel("b1")
    store.save_report("b1", {"status": "budget_exceeded"})
    assert store.reopen(spec.model_copy(update={"budget_usd": 2e-6})) == 1
    assert store.report("b1") is None and not store.cancelled("b1")
    state = store.budget("b1")
    assert (state.cap_nusd, state.spent_nusd, state.reserved_nusd) == (2000, 900, 0)
    assert not state.exhausted and store.spec("b1").budget_usd == 2e-6
    assert store.save_report("b1", {"status": "succeeded"})  # the new report replaces it
    assert store.reopen(spec) == 2 and store.ledger("b1")["m"].calls == 1


def envelope_of(node_id: str, content: str) -> NodeEnvelope:
    return NodeEnvelope(node_id=node_id, input_ref="r", model="m", status="ok", content=content)


def test_a_held_answer_is_counted_once_with_its_envelope(store: JobStore) -> None:
    job(store)
    assert store.claim("b1", "n0", "run-1", 30)
    held = HeldAnswer(call("c1", 500, key="k", text="first"), claim_lease("b1", "n0", "run-1"))
    assert store.finish_billed_node("b1", envelope_of("n0", "first"), None, held)
    assert not store.finish_billed_node("b1", envelope_of("n0", "first"), None, held)  # again
    assert store.ledger("b1")["m"].calls == 1
    assert store.ledger("b1")["m"].usage == call("c1", 500).usage  # reasoning tokens too
    assert store.budget("b1").spent_nusd == 500
    stored = store.answer("b1", "k")
    assert stored is not None and stored.content == "first"
    assert store.envelope("b1", "n0") == envelope_of("n0", "first")
    assert store.claim("b1", "n0", "run-2", 30)  # the claim ended with the answer


def test_a_fenced_held_answer_is_still_counted_but_stores_nothing(store: JobStore) -> None:
    job(store)
    assert store.claim("b1", "n1", "other run", 30)  # this run's claim lapsed and was taken
    held = HeldAnswer(call("c2", 300, key="k2"), claim_lease("b1", "n1", "this run"))
    lost = task_lease("b1", "t1")  # and its task lease is not held either
    assert not store.finish_billed_node("b1", envelope_of("n1", "late"), lost, held)
    assert store.ledger("b1")["m"].calls == 1  # the gateway billed it: counted
    assert store.answer("b1", "k2") is None
    assert store.envelope("b1", "n1") is None
    assert not store.claim("b1", "n1", "a third run", 30)  # the other run keeps its claim
