"""No call billed twice, and the budget cap, on one node at a time (memory store, mock
gateway). The same behaviour on real Redis and real workers: tests/integration."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import httpx2
import pytest
from doubles import MockGateway, completion

from swarm.calls.request import CallRequest
from swarm.calls.runtime import Runtime
from swarm.catalog import load_catalog
from swarm.cost.budget import call_bound_nusd, prompt_estimate
from swarm.cost.pricing import usd_of_nusd
from swarm.jobs.aggregation import run_aggregation
from swarm.jobs.prompts import subagent_messages
from swarm.jobs.subagent import run_node
from swarm.records import ErrorKind, JobSpec, NodeEnvelope
from swarm.settings import Settings
from swarm.store import MemoryJobStore
from swarm.store.heartbeat import LeaseKeeper

MakeRuntime = Callable[..., tuple[Runtime, MockGateway]]
BIG = "x" * 60_000  # 15,000 prompt tokens: a node costs more than the aggregation's bound


def new_job(rt: Runtime, n: int, *, budget_usd: float | None = None, text: str = "") -> JobSpec:
    spec = JobSpec(
        job_id="j1",
        instruction="find bugs",
        aggregate_instruction="merge",
        model="kimi-k2.5",
        aggregate_model="kimi-k2.5",
        node_ids=tuple(f"n{i}" for i in range(n)),
        input_refs=tuple(f"f{i}.py" for i in range(n)),
        submitted_at=time.time(),
        max_tokens=20,
        budget_usd=budget_usd,
    )
    rt.store.create_job(spec, [f"input {i} {text}" for i in range(n)])
    return spec


def exact(body: dict[str, Any], n: int) -> httpx2.Response:
    """Bills exactly the bound: the estimated prompt and the whole max_tokens."""
    prompt = prompt_estimate(m["content"] for m in body["messages"])
    return completion(f"answer {n}", prompt=prompt, completion_tokens=body["max_tokens"])


class CrashOnce(MemoryJobStore):
    """Fails the first envelope write, as a worker killed right after the gateway answered."""

    crashed = False

    def finish_node(self, job_id: str, envelope: NodeEnvelope, fence: Any = None) -> bool:
        if not self.crashed:
            self.crashed = True
            raise RuntimeError("worker lost")
        return super().finish_node(job_id, envelope, fence)


def test_an_answer_stored_before_a_crash_is_reused(make_runtime: MakeRuntime) -> None:
    rt, gw = make_runtime(exact)
    rt = Runtime(rt.settings, rt.catalog, CrashOnce(), rt.client)
    new_job(rt, 1)
    with pytest.raises(RuntimeError, match="worker lost"):
        run_node(rt, "j1", "n0")
    again = run_node(rt, "j1", "n0")  # the redelivered task
    assert again.ok and again.content == "answer 1" and len(gw.requests) == 1
    assert rt.store.ledger("j1")["kimi-k2.5"].calls == 1


def test_a_concurrent_duplicate_waits_for_the_answer(make_runtime: MakeRuntime) -> None:
    def slow(body: dict[str, Any], n: int) -> httpx2.Response:
        time.sleep(0.3)
        return exact(body, n)

    rt, gw = make_runtime(slow)
    new_job(rt, 1)
    results: list[NodeEnvelope] = []
    threads = [
        threading.Thread(target=lambda: results.append(run_node(rt, "j1", "n0"))) for _ in range(3)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(results) == 3 and all(r.ok and r.content == "answer 1" for r in results)
    assert len(gw.requests) == 1 and rt.store.ledger("j1")["kimi-k2.5"].calls == 1


def test_a_billed_answer_without_content_is_counted(make_runtime: MakeRuntime) -> None:
    def empty_first(body: dict[str, Any], n: int) -> httpx2.Response:
        resp = completion("ok", prompt=50, completion_tokens=7)
        if n == 1:
            data = resp.json()
            data["choices"] = []
            return httpx2.Response(200, json=data)
        return resp

    rt, gw = make_runtime(empty_first)
    new_job(rt, 1)
    env = run_node(rt, "j1", "n0")
    assert env.ok and env.attempts == 2 and len(gw.requests) == 2
    line = rt.store.ledger("j1")["kimi-k2.5"]
    assert line.calls == 2 and line.usage.prompt_tokens == 100


def call_key(slot: str, messages: list[dict[str, str]], max_tokens: int, **opts: bool) -> str:
    kimi = load_catalog().model("kimi-k2.5")
    return CallRequest.of("j", slot, kimi, messages, max_tokens, **opts).key


def test_the_idempotency_key_names_job_node_model_and_request() -> None:
    msgs = [{"role": "user", "content": "a"}]
    key = call_key("n1", msgs, 10)
    assert key.startswith("j:n1:kimi-k2.5:")
    assert key == call_key("n1", [dict(m) for m in msgs], 10)
    assert key == call_key("n1", msgs, 10, budgeted=True, json_mode=True)  # options not in it
    assert key != call_key("n1", [{"role": "user", "content": "b"}], 10)
    assert key != call_key("n1", msgs, 11)
    assert key != call_key("n2", msgs, 10)


def node_bound(rt: Runtime) -> int:
    """The cost bound of one node of new_job(text=BIG) (all nodes have the same size)."""
    messages = subagent_messages("find bugs", "f0.py", f"input 0 {BIG}")
    prompt = prompt_estimate(m["content"] for m in messages)
    return call_bound_nusd(rt.catalog.model("kimi-k2.5"), prompt, 20)


def test_the_cap_stops_the_remaining_nodes_before_the_gateway(make_runtime: MakeRuntime) -> None:
    rt, gw = make_runtime(exact)
    bound = node_bound(rt)
    spec = new_job(rt, 10, budget_usd=usd_of_nusd(4 * bound + 1_000_000), text=BIG)
    envs = [run_node(rt, "j1", n) for n in spec.node_ids]
    assert [e.status for e in envs] == ["ok"] * 4 + ["error"] * 6
    assert all(e.error_kind is ErrorKind.BUDGET_EXCEEDED and e.attempts == 0 for e in envs[4:])
    assert len(gw.requests) == 4
    budget = rt.store.budget("j1")
    assert budget.spent_nusd == 4 * bound and budget.reserved_nusd == 0 and budget.exhausted
    report = run_aggregation(rt, "j1")
    # Half a node's bound is left: not enough for the aggregation's bound either.
    assert report["status"] == "budget_exceeded" and report["final"] == ""
    assert "6 of 10 sub-agents never ran" in report["error"]
    assert "does not cover the aggregation" in report["error"] and len(gw.requests) == 4
    assert report["failures_by_kind"] == {"budget_exceeded": 6}
    assert report["budget_usd"] == spec.budget_usd
    assert report["cost_usd"] <= spec.budget_usd


def test_the_aggregation_runs_on_what_is_left(make_runtime: MakeRuntime) -> None:
    rt, gw = make_runtime(exact)
    bound = node_bound(rt)
    # 4 nodes fit, the 5th does not, and what is left covers the aggregation's bound
    # (a kimi call of 16,384 output tokens plus 4 short results: ~10M nano-USD < bound).
    spec = new_job(rt, 10, budget_usd=usd_of_nusd(4 * bound + 12_000_000), text=BIG)
    assert bound > 12_000_000
    for n in spec.node_ids:
        run_node(rt, "j1", n)
    report = run_aggregation(rt, "j1")
    assert report["status"] == "budget_exceeded" and report["final"].startswith("answer 5")
    assert len(gw.requests) == 5 and report["succeeded"] == 4
    assert report["cost_usd"] <= spec.budget_usd


class CountingUnclaims(MemoryJobStore):
    unclaims = 0

    def unclaim(self, job_id: str, slot: str, owner: str) -> None:
        self.unclaims += 1
        super().unclaim(job_id, slot, owner)


@pytest.mark.parametrize(("status", "unclaims"), [(200, 0), (400, 1)])
def test_a_claim_held_as_a_lease_ends_with_the_stored_answer(
    fast_settings: Settings, status: int, unclaims: int
) -> None:
    store = CountingUnclaims()
    answer = completion("ok") if status == 200 else httpx2.Response(status, json={"error": {}})
    gw = MockGateway(lambda body, n: answer)
    keeper = LeaseKeeper(store, lease_s=30)
    rt = Runtime(fast_settings, load_catalog(), store, gw.client(), leases=keeper)
    spec = new_job(rt, 1)
    envelope = run_node(rt, spec.job_id, "n0")
    assert envelope.ok is (status == 200)
    assert store.unclaims == unclaims  # an answer released the claim in its own write
    assert store.claim(spec.job_id, "n0", "next run", 5)  # either way the slot is free
    assert keeper.held() == []
    keeper.stop()


class FrozenAfterClaiming(MemoryJobStore):
    """A store where the process froze right after taking a claim: the claim lapsed and
    another run took the slot before this one could call."""

    def claim_or_answer(
        self, job_id: str, slot: str, owner: str, ttl_s: float, key: str, companion: Any = None
    ) -> Any:
        claimed, stored = super().claim_or_answer(job_id, slot, owner, ttl_s, key, companion)
        if claimed:
            with self._lock:
                self._job(job_id).leases["claim:" + slot] = ("the run that took over", 1e12)
        return claimed, stored


class FrozenKeeper(LeaseKeeper):
    """A heartbeat that never beat (the process was frozen): every call checks its claim."""

    def _start(self) -> None:
        self.beat_s = 0.0


def test_a_run_that_lost_its_claim_while_frozen_does_not_call(fast_settings: Settings) -> None:
    from swarm.errors import LeaseLostError

    gw = MockGateway(lambda body, n: completion("late"))
    keeper = FrozenKeeper(FrozenAfterClaiming(), lease_s=30)
    rt = Runtime(fast_settings, load_catalog(), keeper.store, gw.client(), leases=keeper)
    spec = new_job(rt, 1)
    with pytest.raises(LeaseLostError):
        run_node(rt, spec.job_id, "n0")
    assert gw.requests == []  # the run that took over calls; this one never does


class CountingRenewals(MemoryJobStore):
    """Counts the claim checks in Redis (renew_leases) a call makes."""

    renewals = 0

    def renew_leases(self, leases: Any, ttl_s: float) -> Any:
        self.renewals += 1
        return super().renew_leases(leases, ttl_s)


def test_the_claim_is_checked_once_per_attempt(fast_settings: Settings) -> None:
    # A heartbeat that never beat: every attempt checks its claim in the store, once (the
    # fence step, right before the request).
    answers = iter([httpx2.Response(503, json={"error": {}}), completion("ok")])
    gw = MockGateway(lambda body, n: next(answers))
    keeper = FrozenKeeper(CountingRenewals(), lease_s=30)
    rt = Runtime(fast_settings, load_catalog(), keeper.store, gw.client(), leases=keeper)
    spec = new_job(rt, 1)
    assert run_node(rt, spec.job_id, "n0").attempts == 2
    assert isinstance(keeper.store, CountingRenewals) and keeper.store.renewals == 2
    keeper.stop()
