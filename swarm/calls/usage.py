"""An answer's ``usage`` object read into swarm.records.Usage, whatever provider wrote it.

Providers name the same counts differently; the ledger keeps one convention: prompt tokens
include the cached ones, completion tokens include the reasoning ones.

- OpenAI: prompt ``prompt_tokens``, cached ``prompt_tokens_details.cached_tokens``,
  completion ``completion_tokens``, reasoning ``completion_tokens_details.reasoning_tokens``.
- Moonshot: cached as a top-level ``cached_tokens`` (K2.5 may send the nested one too);
  reasoning tokens are not reported apart.
- DeepSeek: cached ``prompt_cache_hit_tokens`` (hit + ``prompt_cache_miss_tokens`` =
  ``prompt_tokens``), reasoning as OpenAI's.
- Anthropic-style: ``input_tokens`` (or ``prompt_tokens``), ``cache_read_input_tokens``,
  ``cache_creation_input_tokens``, ``output_tokens``: prompt = the three input counts
  together, cached = the cache reads.

A count sent under two names (Moonshot's top-level and nested ``cached_tokens``,
DeepSeek's hit count and the nested one) is the same count: the first name found in the
order of ``CACHED_NAMES`` is taken, never their sum.

Anthropic counts cache reads and writes *on top of* its input tokens, not inside them.
Some OpenAI-compatible proxies pass those two fields beside ``prompt_tokens``; whether
``prompt_tokens`` already includes them is told by the rest of the object
(``anthropic_on_top``): a proxy that fills OpenAI's nested ``cached_tokens`` follows
OpenAI's convention (inside), and a ``total_tokens`` equal to prompt plus completion
says the same. Counting them both ways is the double count this module avoids. Cache
writes are input tokens that were not read from the cache, so they are billed at the
model's input price (the catalog has no cache-write price).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from swarm.records import Usage

log = logging.getLogger(__name__)

CACHED_NAMES = (
    ("prompt_cache_hit_tokens",),
    ("cached_tokens",),
    ("prompt_tokens_details", "cached_tokens"),
    ("input_tokens_details", "cached_tokens"),
)
"""Where a provider puts the cached prompt tokens (OpenAI-style convention: inside the
prompt tokens), in the order they are looked for: DeepSeek, Moonshot, OpenAI, OpenAI's
Responses naming."""
REASONING_NAMES = (
    ("completion_tokens_details", "reasoning_tokens"),
    ("output_tokens_details", "reasoning_tokens"),
)
"""Where a provider puts the reasoning tokens (inside the completion tokens)."""


def usage_of(raw: Mapping[str, Any] | None) -> Usage:
    """The Usage an answer's ``usage`` object reports (zero when it has none)."""
    if not raw:
        return Usage()
    completion = _first(raw, (("completion_tokens",), ("output_tokens",))) or 0
    reasoning = _first(raw, REASONING_NAMES) or 0
    prompt, cached = _prompt_and_cached(raw)
    if cached > prompt or reasoning > completion:
        log.debug("usage %s reports more cached or reasoning tokens than prompt or "
                  "completion tokens: counted as at most those", raw)  # fmt: skip
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        cached_tokens=min(cached, prompt),
        reasoning_tokens=min(reasoning, completion),
    )


def _prompt_and_cached(raw: Mapping[str, Any]) -> tuple[int, int]:
    """Prompt tokens (cached included) and cached tokens."""
    read = _count(raw.get("cache_read_input_tokens"))
    written = _count(raw.get("cache_creation_input_tokens"))
    prompt = _first(raw, (("prompt_tokens",), ("input_tokens",)))
    if prompt is None:
        hit = _count(raw.get("prompt_cache_hit_tokens"))
        prompt = hit + _count(raw.get("prompt_cache_miss_tokens"))
    if (read or written) and anthropic_on_top(raw):
        return prompt + read + written, read
    cached = _first(raw, CACHED_NAMES)
    return prompt, read if cached is None else cached


def anthropic_on_top(raw: Mapping[str, Any]) -> bool:
    """True when ``cache_read_input_tokens``/``cache_creation_input_tokens`` come on top
    of the prompt count (Anthropic's convention), False when the prompt count already
    holds them (a proxy that converted to OpenAI's)."""
    if "prompt_tokens" not in raw:
        return True  # Anthropic's own naming: input_tokens leaves the cache out
    if _first(raw, CACHED_NAMES) is not None:
        return False  # OpenAI's nested cached count: the proxy follows OpenAI's convention
    total = raw.get("total_tokens")
    if isinstance(total, int) and not isinstance(total, bool):
        prompt = _count(raw.get("prompt_tokens"))
        return total != prompt + _count(raw.get("completion_tokens"))
    return True


def _first(raw: Mapping[str, Any], paths: tuple[tuple[str, ...], ...]) -> int | None:
    """The count at the first of ``paths`` that holds a number."""
    for path in paths:
        value: Any = raw
        for key in path:
            value = value.get(key) if isinstance(value, Mapping) else None
        if _is_count(value):
            return _count(value)
    return None


def _is_count(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _count(value: Any) -> int:
    return max(int(value), 0) if _is_count(value) else 0
