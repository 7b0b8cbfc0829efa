"""Deterministic content, request parsing and prompt-prefix caching."""

from __future__ import annotations

import json
from typing import Any

import pytest

from swarm.sim.content import (
    COMPLETION_MAX_TOKENS,
    COMPLETION_MIN_TOKENS,
    ChatRequest,
    PrefixCache,
    RequestError,
    make_completion,
    message_text,
    natural_completion_tokens,
    parse_chat_request,
    prompt_tokens,
    request_digest,
)
from swarm.tokens import estimate_messages


def _request(*contents: str, model: str = "gpt-4.1", **extra: Any) -> ChatRequest:
    roles = ["system", *["user"] * (len(contents) - 1)]
    messages = [{"role": r, "content": c} for r, c in zip(roles, contents, strict=True)]
    return parse_chat_request({"model": model, "messages": messages, **extra})


def test_same_request_same_content() -> None:
    first = make_completion(_request("be brief", "hello"))
    again = make_completion(_request("be brief", "hello"))
    assert first == again
    digest = request_digest("gpt-4.1", ["be brief", "hello"])
    assert first.content.startswith(f"sim:gpt-4.1:{digest[:12]} results=0 ")
    assert first.finish_reason == "stop"
    assert COMPLETION_MIN_TOKENS <= first.completion_tokens <= COMPLETION_MAX_TOKENS


def test_content_depends_on_model_and_messages() -> None:
    base = make_completion(_request("s", "hello")).content
    assert make_completion(_request("s", "hello", model="kimi-k2.5")).content != base
    assert make_completion(_request("s", "hello!")).content != base


def test_natural_length_covers_the_range() -> None:
    lengths = {natural_completion_tokens(request_digest("m", [str(i)])) for i in range(2000)}
    assert min(lengths) == COMPLETION_MIN_TOKENS
    assert max(lengths) == COMPLETION_MAX_TOKENS


def test_content_length_tracks_completion_tokens() -> None:
    completion = make_completion(_request("s", "a longer question"))
    assert abs(len(completion.content) / 4 - completion.completion_tokens) < 15


@pytest.mark.parametrize("key", ["max_tokens", "max_completion_tokens"])
def test_max_tokens_caps_with_finish_reason_length(key: str) -> None:
    cap: dict[str, Any] = {key: 7}
    completion = make_completion(_request("s", "hello", **cap))
    assert completion.completion_tokens == 7
    assert completion.finish_reason == "length"
    room: dict[str, Any] = {key: 10_000}
    roomy = make_completion(_request("s", "hello", **room))
    assert roomy.finish_reason == "stop"


def test_json_mode_gives_a_json_object() -> None:
    request = _request("s", "x <result a> <result b>", response_format={"type": "json_object"})
    data = json.loads(make_completion(request).content)
    assert data["model"] == "gpt-4.1"
    assert data["digest"] == request_digest("gpt-4.1", request.contents)[:12]
    assert data["results"] == 2
    capped = _request("s", "x", response_format={"type": "json_object"}, max_tokens=3)
    assert json.loads(make_completion(capped).content)["model"] == "gpt-4.1"


def test_results_counts_tags_of_the_last_user_message_only() -> None:
    request = _request("<result a>", "<result 1> <result 2> <result 3>")
    assert " results=3 " in make_completion(request).content
    trailing = parse_chat_request(
        {
            "model": "m",
            "messages": [
                {"role": "user", "content": "<result x>"},
                {"role": "assistant", "content": "<result y> <result z>"},
            ],
        }
    )
    assert trailing.last_user_content == "<result x>"
    assert " results=1 " in make_completion(trailing).content


def test_message_text_accepts_parts_and_null() -> None:
    parts = [{"type": "text", "text": "a"}, {"type": "image_url"}, {"type": "text", "text": "b"}]
    assert message_text(parts) == "ab"
    assert message_text(None) == ""
    assert message_text("plain") == "plain"


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ([], None),
        ({"messages": [{"role": "user", "content": "x"}]}, "model"),
        ({"model": "m"}, "messages"),
        ({"model": "m", "messages": []}, "messages"),
        ({"model": "m", "messages": ["hi"]}, "messages"),
        ({"model": "m", "messages": [{"role": "user"}], "max_tokens": 0}, "max_tokens"),
        ({"model": "m", "messages": [{"role": "user"}], "max_tokens": True}, "max_tokens"),
        ({"model": "m", "messages": [{"role": "user"}], "stream": True}, "stream"),
    ],
)
def test_malformed_requests_raise_request_error(body: object, param: str | None) -> None:
    with pytest.raises(RequestError) as caught:
        parse_chat_request(body)
    assert caught.value.param == param


def test_prompt_tokens_use_the_shared_estimate() -> None:
    request = _request("system text", "hello there")
    assert prompt_tokens(request) == estimate_messages(["system text", "hello there"])


def test_prefix_cache_reports_the_longest_seen_prefix() -> None:
    cache = PrefixCache(min_tokens=1024, max_entries=100)
    system = "word " * 1000  # ~1250 tokens on its own
    first = _request(system, "question one")
    assert cache.lookup_and_store(first) == 0
    second = _request(system, "question two")
    assert cache.lookup_and_store(second) == estimate_messages([system])
    assert cache.lookup_and_store(second) == prompt_tokens(second)
    assert cache.lookup_and_store(_request(system, "question two", model="other")) == 0


def test_prefix_cache_ignores_short_prefixes_and_evicts_old_ones() -> None:
    cache = PrefixCache(min_tokens=1024, max_entries=2)
    short = _request("short", "prompt")
    cache.lookup_and_store(short)
    assert cache.lookup_and_store(short) == 0
    longs = [_request(f"{i} " + "word " * 1000, "q") for i in range(3)]
    for request in longs:
        cache.lookup_and_store(request)  # each stores 2 prefixes; capacity is 2
    assert cache.lookup_and_store(longs[0]) == 0
    assert cache.lookup_and_store(longs[0]) == prompt_tokens(longs[0])
