"""Answer lengths learned from finished jobs: what the pre-flight's expected cost assumes."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import httpx2
from doubles import MockGateway, completion, new_job

from swarm.calls.runtime import Runtime
from swarm.catalog import load_catalog
from swarm.cost.budget import JobEstimate
from swarm.jobs.aggregation import run_aggregation
from swarm.jobs.estimate import estimate_job
from swarm.jobs.subagent import run_node
from swarm.records import InputItem
from swarm.store import MemoryJobStore, answer_lengths
from swarm.store.answer_lengths import MIN_CALLS, typical_answer_tokens, typical_answers

MakeRuntime = Callable[..., tuple[Runtime, MockGateway]]


class FakeRedis:
    """The commands the module sends: HINCRBY and EXPIRE (in a pipeline) and HMGET."""

    def __init__(self) -> None:
        self.hashes: dict[str, Counter[str]] = {}
        self.ttls: dict[str, int] = {}

    def pipeline(self, transaction: bool = True) -> FakeRedis:
        return self

    def hincrby(self, key: str, field: str, amount: int) -> None:
        self.hashes.setdefault(key, Counter())[field] += amount

    def expire(self, key: str, seconds: int) -> None:
        self.ttls[key] = seconds

    def execute(self) -> None:
        pass

    def hmget(self, key: str, fields: list[str]) -> list[bytes | None]:
        found = self.hashes.get(key, Counter())
        return [str(found[f]).encode() if f in found else None for f in fields]


class RedisBacked(MemoryJobStore):
    def __init__(self) -> None:
        super().__init__()
        self.redis: Any = FakeRedis()


def test_until_learned_the_typical_answer_is_the_catalogs_share() -> None:
    kimi = load_catalog().model("kimi-k2.5")
    assert typical_answer_tokens(None, kimi, "default") == kimi.max_tokens // 4
    assert typical_answer_tokens(MemoryJobStore(), kimi, "default") == kimi.max_tokens // 4


def test_answers_are_learned_per_model_and_kind_then_for_any_kind() -> None:
    for store in (MemoryJobStore(), RedisBacked()):
        answer_lengths.record(store, {("kimi-k2.5", "review"): (300 * (MIN_CALLS - 1), 4)})
        assert answer_lengths.learned(store, "kimi-k2.5", "review") is None  # too few yet
        if isinstance(store, RedisBacked):  # the counts expire, as every key swarm writes
            assert store.redis.ttls == {answer_lengths.KEY: answer_lengths.KEEP_S}
        answer_lengths.record(store, {("kimi-k2.5", "review"): (300, 1)})
        assert answer_lengths.learned(store, "kimi-k2.5", "review") == 300
        assert answer_lengths.learned(store, "kimi-k2.5", "extract") == 300  # any kind
        assert answer_lengths.learned(store, "kimi-k2.5", None) == 300
        assert answer_lengths.learned(store, "gpt-4.1", "review") is None


def test_a_finished_job_teaches_its_answer_lengths(make_runtime: MakeRuntime) -> None:
    def answer(body: dict[str, Any], n: int) -> httpx2.Response:
        return completion("an answer", prompt=100, completion_tokens=120)

    rt, _ = make_runtime(answer)
    spec = new_job(rt, n=MIN_CALLS)
    for node in spec.node_ids:
        run_node(rt, "j1", node)
    run_aggregation(rt, "j1")
    assert answer_lengths.learned(rt.store, "kimi-k2.5", None) == 120  # the sub-agents'
    assert answer_lengths.learned(rt.store, "kimi-k2.5", "aggregate") is None  # 1 of 5


def test_the_estimate_expects_answers_of_typical_length_below_its_bound() -> None:
    catalog = load_catalog()
    kimi = catalog.model("kimi-k2.5")
    items = [InputItem(ref=f"f{i}", text="an input " * 50) for i in range(10)]
    bound = estimate_job(items, "summarise", "merge", kimi, kimi)
    assert bound.expected_nusd is None
    typical = estimate_job(
        items, "summarise", "merge", kimi, kimi, **typical_answers(None, kimi, None, kimi)
    )
    assert isinstance(typical, JobEstimate) and typical.expected_usd is not None
    assert 0 < typical.expected_usd < typical.total_usd == bound.total_usd
    at_cap = estimate_job(
        items, "summarise", "merge", kimi, kimi,
        answer_tokens=kimi.max_tokens, aggregate_answer_tokens=kimi.max_tokens,
    )  # fmt: skip
    assert at_cap.expected_usd == at_cap.total_usd


def test_the_pre_flight_says_the_expected_cost_beside_the_bound() -> None:
    import pytest

    from swarm.cli.estimate_line import estimate_text
    from swarm.cost.budget import preflight
    from swarm.errors import BudgetExceededError

    bound = JobEstimate(
        nodes=3, prompt_tokens=10, completion_tokens=20, subagents_nusd=700_000_000,
        aggregation_nusd=81_914_300, expected_nusd=115_200_000,
    )  # fmt: skip
    assert estimate_text(bound).startswith(
        "estimate: expected ~$0.1152 (answers of typical length), at most $0.7819 for 3 "
        "sub-agents ($0.7000) and the aggregation ($0.0819)"
    )
    with pytest.raises(BudgetExceededError, match=r"up to \$0\.7819 \(expected ~\$0\.1152; "):
        preflight(bound, 0.01, force=False)
