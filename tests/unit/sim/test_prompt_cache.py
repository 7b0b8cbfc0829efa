"""The simulator's provider-like prompt cache: a prefix is cached once the first request
carrying it has been answered, only for requests arriving after that, for a TTL."""

from __future__ import annotations

from swarm.sim.content import ChatRequest, parse_chat_request
from swarm.sim.prompt_cache import PromptCache

SHARED = "shared context " * 400


def _chat(user: str, model: str = "kimi-k2.5") -> ChatRequest:
    body = {"model": model, "messages": [
        {"role": "system", "content": SHARED}, {"role": "user", "content": user},
    ]}  # fmt: skip
    return parse_chat_request(body)


def test_requests_sent_together_all_miss_and_later_ones_hit() -> None:
    now = [0.0]
    cache = PromptCache(min_tokens=1024, ttl_s=300, clock=lambda: now[0])
    first, second = cache.arrive(_chat("a")), cache.arrive(_chat("b"))
    now[0] = 1.0
    assert cache.answered(first) == 0
    assert cache.answered(second) == 0  # arrived before the first was answered
    later = cache.arrive(_chat("c"))
    now[0] = 2.0
    shared_tokens = _chat("c").message_tokens[0]
    assert cache.answered(later) == shared_tokens  # only the shared system message


def test_prefixes_are_per_model_and_short_ones_are_not_cached() -> None:
    now = [0.0]
    cache = PromptCache(min_tokens=1024, ttl_s=300, clock=lambda: now[0])
    cache.answered(cache.arrive(_chat("a")))
    now[0] = 1.0
    assert cache.answered(cache.arrive(_chat("b", model="gpt-4.1"))) == 0
    short = parse_chat_request({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    cache.answered(cache.arrive(short))
    assert cache.answered(cache.arrive(short)) == 0


def test_an_entry_expires_ttl_after_its_last_use() -> None:
    now = [0.0]
    cache = PromptCache(min_tokens=1024, ttl_s=10, clock=lambda: now[0])
    cache.answered(cache.arrive(_chat("a")))
    now[0] = 8.0
    assert cache.answered(cache.arrive(_chat("b"))) > 0  # a hit refreshes the entry
    now[0] = 17.0
    assert cache.answered(cache.arrive(_chat("c"))) > 0
    now[0] = 40.0
    assert cache.answered(cache.arrive(_chat("d"))) == 0  # expired: written again
