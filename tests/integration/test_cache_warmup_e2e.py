"""Issue 40's done-when on the simulator's provider-like prompt cache: a 30-input job with
a ~3,000-token shared context bills at least 90% of its cacheable shared tokens as cached
with the warm-up and about none without it; the job's ledger equals the simulator's count.
The gate in Redis (the workers' twin) lets one leader through and the others after it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
import redis

import swarm.testing
from swarm.calls.warmup import RedisWarmup
from swarm.jobs.prompts import SUBAGENT_ROLE, shared_prefix
from swarm.sim import SimConfig, start_in_thread
from swarm.sim.tokenizer import count_messages

NODES = 30
MODEL = "kimi-k2.5"  # the seeds' model; caches prefixes of 256 tokens on (catalog)
INSTRUCTION = "Review this pull request against the repository's conventions."
CONTEXT = "\n".join(
    f"Convention {i}: functions stay small, typed, and log what they decide at DEBUG; "
    f"module {i} owns one concept and imports only the layers below it."
    for i in range(90)
)  # about 3,000 tokens


@pytest.fixture
def sim() -> Iterator[Any]:
    # Answers of 2 s (hosted ones take seconds): the in-process worker on a busy machine
    # may spread 30 calls over a second, and later arrivals would then hit without the
    # warm-up too; the comparison needs the first wave to be sent within one answer.
    config = SimConfig(latency_ms=2000, prompt_cache=True, prompt_cache_ttl_s=600)
    with start_in_thread(config) as running:
        yield running


def _run(sim: Any, warmup: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    inputs = [f"PR #{i}: a diff of a few lines in module {i}." for i in range(NODES)]
    with swarm.testing.embedded(
        base_url=sim.base_url, api_key="test", worker_concurrency=NODES + 2,
        cache_warmup=warmup, max_attempts=1,
    ) as client:  # fmt: skip
        report = client.submit(inputs, INSTRUCTION, model=MODEL, context=CONTEXT).wait(60)
    return report.to_dict(), sim.stats()


def _cacheable() -> int:
    """Shared prefix tokens (as the simulator counts them) of every node but the first."""
    return (NODES - 1) * count_messages([shared_prefix(SUBAGENT_ROLE, INSTRUCTION, CONTEXT)])


def test_the_warm_up_bills_the_shared_context_as_cached(sim: Any) -> None:
    report, stats = _run(sim, warmup=True)
    assert report["status"] == "succeeded"
    node_cached = sum(node["usage"]["cached_tokens"] for node in report["nodes"])
    assert node_cached >= 0.9 * _cacheable()
    assert report["usage"]["cached_tokens"] == stats["cached_tokens"]  # ledger = simulator
    assert report["models"][MODEL]["cached_tokens"] == stats["models"][MODEL]["cached_tokens"]


def test_without_the_warm_up_the_first_wave_misses() -> None:
    # Answers of 6 s: on a loaded machine (the full suite on 2 cores) the in-process worker
    # spread 30 calls over more than 2 s, and the later ones hit: the first wave must be
    # sent within one answer for the comparison to measure the fan-out, not the machine.
    config = SimConfig(latency_ms=6000, prompt_cache=True, prompt_cache_ttl_s=600)
    with start_in_thread(config) as sim:
        report, stats = _run(sim, warmup=False)
    assert report["status"] == "succeeded"
    node_cached = sum(node["usage"]["cached_tokens"] for node in report["nodes"])
    assert node_cached <= 0.1 * _cacheable()
    assert report["usage"]["cached_tokens"] == stats["cached_tokens"]


def test_the_redis_gate_lets_one_leader_through_first(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    gate = RedisWarmup(client)
    assert gate.lead("k", hold_s=30) and not gate.lead("k", hold_s=30)
    assert not gate.wait("k", timeout_s=0.05)  # still warming: the bounded wait runs out
    went = threading.Event()

    def follower() -> None:
        went.set() if gate.wait("k", timeout_s=30) else None

    thread = threading.Thread(target=follower)
    thread.start()
    assert not went.wait(0.2)
    gate.done("k")
    thread.join(10)
    assert went.is_set() and not gate.lead("k", hold_s=30)  # warm: nobody leads again


def test_the_simulator_flag_reports_hits_only_for_later_arrivals() -> None:
    from concurrent.futures import ThreadPoolExecutor

    import openai

    system = {"role": "system", "content": "policy " * 800}
    config = SimConfig(latency_ms=300, prompt_cache=True)
    with start_in_thread(config) as running:
        client = openai.OpenAI(base_url=running.base_url, api_key="test", max_retries=0)

        def ask(text: str) -> int:
            messages: Any = [system, {"role": "user", "content": text}]
            answer = client.chat.completions.create(model=MODEL, messages=messages)
            assert answer.usage is not None and answer.usage.prompt_tokens_details is not None
            return answer.usage.prompt_tokens_details.cached_tokens or 0

        with ThreadPoolExecutor(4) as pool:  # sent together: all miss
            assert list(pool.map(ask, ["a", "b", "c", "d"])) == [0, 0, 0, 0]
        assert ask("e") == count_messages([system["content"]])  # after the answers: a hit
        assert running.stats()["cached_tokens"] == count_messages([system["content"]])
