"""swarm.calls.usage: each provider's usage object -> the ledger's Usage (prompt tokens
include the cached ones, completion tokens the reasoning ones, nothing counted twice)."""

from __future__ import annotations

from typing import Any

import pytest

from swarm.calls.gateway import answer_from_json
from swarm.calls.usage import usage_of
from swarm.catalog import load_catalog
from swarm.cost.pricing import cost_usd
from swarm.records import Usage

FORMATS: list[tuple[str, dict[str, Any] | None, Usage]] = [
    ("none", None, Usage()),
    (
        "plain",
        {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        Usage(prompt_tokens=10, completion_tokens=5),
    ),
    (
        "openai nested cached and reasoning",
        {
            "prompt_tokens": 2006, "completion_tokens": 300, "total_tokens": 2306,
            "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 256, "audio_tokens": 0},
        },
        Usage(prompt_tokens=2006, completion_tokens=300, cached_tokens=1920, reasoning_tokens=256),
    ),
    (
        "moonshot top-level cached",
        {"prompt_tokens": 19, "completion_tokens": 21, "total_tokens": 40, "cached_tokens": 10},
        Usage(prompt_tokens=19, completion_tokens=21, cached_tokens=10),
    ),
    (
        "moonshot k2.5 top-level and nested: one count, not two",
        {
            "prompt_tokens": 9392, "completion_tokens": 400, "total_tokens": 9792,
            "cached_tokens": 8385, "prompt_tokens_details": {"cached_tokens": 8385},
        },
        Usage(prompt_tokens=9392, completion_tokens=400, cached_tokens=8385),
    ),
    (
        "deepseek hit/miss (with the nested copy)",
        {
            "prompt_tokens": 100, "completion_tokens": 50, "total_tokens": 150,
            "prompt_tokens_details": {"cached_tokens": 64},
            "prompt_cache_hit_tokens": 64, "prompt_cache_miss_tokens": 36,
            "completion_tokens_details": {"reasoning_tokens": 30},
        },
        Usage(prompt_tokens=100, completion_tokens=50, cached_tokens=64, reasoning_tokens=30),
    ),
    (
        "deepseek hit/miss without prompt_tokens",
        {"completion_tokens": 5, "prompt_cache_hit_tokens": 64, "prompt_cache_miss_tokens": 36},
        Usage(prompt_tokens=100, completion_tokens=5, cached_tokens=64),
    ),
    (
        "anthropic native names: cache read and write on top of input",
        {
            "input_tokens": 50, "output_tokens": 20,
            "cache_read_input_tokens": 1000, "cache_creation_input_tokens": 200,
        },
        Usage(prompt_tokens=1250, completion_tokens=20, cached_tokens=1000),
    ),
    (
        "anthropic-compat proxy: prompt_tokens is the uncached input, total says on top",
        {
            "prompt_tokens": 50, "completion_tokens": 20, "total_tokens": 1270,
            "cache_read_input_tokens": 1000, "cache_creation_input_tokens": 200,
        },
        Usage(prompt_tokens=1250, completion_tokens=20, cached_tokens=1000),
    ),
    (
        "anthropic-compat proxy without total_tokens: Anthropic's convention",
        {"prompt_tokens": 50, "completion_tokens": 20, "cache_read_input_tokens": 1000},
        Usage(prompt_tokens=1050, completion_tokens=20, cached_tokens=1000),
    ),
    (
        "openai-normalizing proxy (LiteLLM-style): nested cached, creation already inside",
        {
            "prompt_tokens": 2006, "completion_tokens": 300, "total_tokens": 2306,
            "prompt_tokens_details": {"cached_tokens": 1920},
            "cache_creation_input_tokens": 86, "cache_read_input_tokens": 1920,
        },
        Usage(prompt_tokens=2006, completion_tokens=300, cached_tokens=1920),
    ),
    (
        "proxy whose total_tokens says the cache fields are inside prompt_tokens",
        {
            "prompt_tokens": 1250, "completion_tokens": 20, "total_tokens": 1270,
            "cache_read_input_tokens": 1000, "cache_creation_input_tokens": 200,
        },
        Usage(prompt_tokens=1250, completion_tokens=20, cached_tokens=1000),
    ),
    (
        "nonsense is clamped: cached <= prompt, reasoning <= completion, no negatives",
        {
            "prompt_tokens": 10, "completion_tokens": 5, "cached_tokens": 99,
            "completion_tokens_details": {"reasoning_tokens": 9}, "prompt_cache_miss_tokens": -3,
        },
        Usage(prompt_tokens=10, completion_tokens=5, cached_tokens=10, reasoning_tokens=5),
    ),
    (
        "booleans and strings are not counts",
        {"prompt_tokens": True, "completion_tokens": "7", "cached_tokens": 3},
        Usage(),
    ),
]  # fmt: skip


@pytest.mark.parametrize(("raw", "expected"), [f[1:] for f in FORMATS], ids=[f[0] for f in FORMATS])
def test_each_usage_format_reads_into_the_ledgers_convention(
    raw: dict[str, Any] | None, expected: Usage
) -> None:
    assert usage_of(raw) == expected


def test_an_answer_carries_the_usage_of_its_format() -> None:
    body = {
        "choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 50, "prompt_cache_hit_tokens": 64,
                  "prompt_cache_miss_tokens": 36,
                  "completion_tokens_details": {"reasoning_tokens": 30}},
    }  # fmt: skip
    assert answer_from_json(body).usage == Usage(
        prompt_tokens=100, completion_tokens=50, cached_tokens=64, reasoning_tokens=30
    )


def test_the_same_call_costs_the_same_in_every_format() -> None:
    """The issue's 4.7x: one call, reported in each provider's format, is billed once at
    the catalog's cached price; reasoning is billed inside the completion tokens."""
    spec = load_catalog().model("kimi-k2.5")
    formats = [
        {"prompt_tokens": 9392, "completion_tokens": 400, "total_tokens": 9792,
         "prompt_tokens_details": {"cached_tokens": 8385},
         "completion_tokens_details": {"reasoning_tokens": 100}},
        {"prompt_tokens": 9392, "completion_tokens": 400, "total_tokens": 9792,
         "cached_tokens": 8385},
        {"prompt_tokens": 9392, "completion_tokens": 400, "total_tokens": 9792,
         "prompt_cache_hit_tokens": 8385, "prompt_cache_miss_tokens": 1007},
        {"input_tokens": 1007, "output_tokens": 400, "cache_read_input_tokens": 8385},
    ]  # fmt: skip
    costs = [cost_usd(spec, usage_of(raw)) for raw in formats]
    expected = (1007 * spec.input_per_mtok_usd + 8385 * spec.cached_input_per_mtok_usd
                + 400 * spec.output_per_mtok_usd) / 1e6  # fmt: skip
    assert costs == [pytest.approx(expected)] * len(formats)
