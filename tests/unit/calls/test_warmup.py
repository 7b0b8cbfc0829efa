"""The cache warm-up's decision (swarm.calls.warmup.plan_warmup) and its in-process gate:
one leader calls first, the others after its answer or after the bounded wait."""

from __future__ import annotations

import threading

from swarm.calls.warmup import MemoryWarmup, plan_warmup, warm_turn
from swarm.catalog import load_catalog
from swarm.settings import load_settings

CATALOG = load_catalog(None)
LONG = [{"role": "system", "content": "x" * 8000}, {"role": "user", "content": "input"}]
SHORT = [{"role": "system", "content": "x" * 400}, {"role": "user", "content": "input"}]


def test_a_long_shared_prefix_on_a_caching_model_is_warmed() -> None:
    plan = plan_warmup(load_settings(), CATALOG.model("gpt-4.1"), LONG, nodes=10)
    assert plan is not None and plan.prefix_tokens >= 1024 and plan.model == "gpt-4.1"
    same = plan_warmup(load_settings(), CATALOG.model("gpt-4.1"), LONG, nodes=3)
    other_model = plan_warmup(load_settings(), CATALOG.model("kimi-k2.5"), LONG, nodes=3)
    assert same is not None and same.key == plan.key  # one key per model and prefix
    assert other_model is not None and other_model.key != plan.key


def test_no_warm_up_when_nothing_would_be_cached_or_it_is_off() -> None:
    settings = load_settings()
    assert plan_warmup(settings, CATALOG.model("gpt-4.1"), SHORT, nodes=10) is None
    assert plan_warmup(settings, CATALOG.model("claude-sonnet-4.5"), LONG, nodes=10) is None
    assert plan_warmup(settings, CATALOG.model("gpt-4.1"), LONG, nodes=1) is None
    off = load_settings(cache_warmup=False)
    assert plan_warmup(off, CATALOG.model("gpt-4.1"), LONG, nodes=10) is None
    # kimi caches from 256 tokens, but a 400-token prefix saves less than a wait is worth
    medium = [{"role": "system", "content": "x" * 1600}, {"role": "user", "content": "in"}]
    assert plan_warmup(settings, CATALOG.model("kimi-k2.5"), medium, nodes=10) is None
    low = load_settings(cache_warmup_min_tokens=0)
    assert plan_warmup(low, CATALOG.model("kimi-k2.5"), medium, nodes=10) is not None


def test_the_bounded_wait_defaults_to_one_node_timeout() -> None:
    plan = plan_warmup(load_settings(node_timeout_s=12), CATALOG.model("gpt-4.1"), LONG, 5)
    assert plan is not None and plan.wait_s == 12
    plan = plan_warmup(load_settings(cache_warmup_wait_s=3), CATALOG.model("gpt-4.1"), LONG, 5)
    assert plan is not None and plan.wait_s == 3


def test_followers_call_once_the_leader_has_answered() -> None:
    gate = MemoryWarmup()
    plan = plan_warmup(load_settings(), CATALOG.model("gpt-4.1"), LONG, nodes=3)
    order: list[str] = []
    leading, release = threading.Event(), threading.Event()

    def leader() -> None:
        with warm_turn(gate, plan, "n0"):
            leading.set()
            release.wait(10)
            order.append("n0")

    def follower(node: str) -> None:
        with warm_turn(gate, plan, node):
            order.append(node)

    first = threading.Thread(target=leader)
    first.start()
    assert leading.wait(10)
    others = [threading.Thread(target=follower, args=(f"n{i}",)) for i in (1, 2)]
    for thread in others:
        thread.start()
    release.set()
    for thread in [first, *others]:
        thread.join(10)
    assert order[0] == "n0" and sorted(order[1:]) == ["n1", "n2"]


def test_a_follower_waits_at_most_the_bound() -> None:
    now = [0.0]
    gate = MemoryWarmup(clock=lambda: now[0])
    assert gate.lead("k", hold_s=5) and not gate.lead("k", hold_s=5)
    assert not gate.wait("k", timeout_s=0.01)  # the leader has not answered
    now[0] = 6.0  # the leader's hold ran out (it died): nobody waits on it any more
    assert gate.wait("k", timeout_s=0.01)
    assert gate.lead("k", hold_s=5)  # and the next node leads again
