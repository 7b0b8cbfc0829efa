"""The ``usage`` object of an answer, in the format of the provider the simulator plays.

One set of counts (prompt tokens with the cached ones inside, completion tokens with the
reasoning ones inside), written the way each provider writes it:

- ``plain``: ``prompt_tokens``, ``completion_tokens``, ``total_tokens`` and
  ``prompt_tokens_details.cached_tokens`` (the simulator's format before profiles;
  reasoning tokens are not reported).
- ``openai``: the same, plus ``completion_tokens_details.reasoning_tokens`` (and the
  zero audio and prediction counts OpenAI sends).
- ``moonshot``: a top-level ``cached_tokens`` only, as Moonshot's chat API documents it
  (K2.5 may also send OpenAI's nested copy: swarm.calls.usage reads either, once);
  reasoning tokens are not reported apart.
- ``deepseek``: ``prompt_cache_hit_tokens`` and ``prompt_cache_miss_tokens`` (their sum is
  ``prompt_tokens``), the nested ``cached_tokens`` DeepSeek also sends, and
  ``completion_tokens_details.reasoning_tokens``.
- ``anthropic``: Anthropic's convention behind an OpenAI-compatible endpoint:
  ``prompt_tokens`` is the input read neither from nor into the cache, and
  ``cache_read_input_tokens``/``cache_creation_input_tokens`` come on top of it
  (``total_tokens`` counts all three and the completion).
"""

from __future__ import annotations

from typing import Any, Literal, get_args

UsageFormat = Literal["plain", "openai", "moonshot", "deepseek", "anthropic"]
USAGE_FORMATS: tuple[str, ...] = get_args(UsageFormat)


def usage_body(
    usage_format: UsageFormat,
    prompt_tokens: int,
    completion_tokens: int,
    cached_tokens: int = 0,
    reasoning_tokens: int = 0,
    cache_write_tokens: int = 0,
) -> dict[str, Any]:
    """The ``usage`` object of an answer. ``prompt_tokens`` includes ``cached_tokens``
    (read from the prompt cache) and ``cache_write_tokens`` (written to it: reported by
    the ``anthropic`` format only); ``completion_tokens`` includes ``reasoning_tokens``."""
    total = prompt_tokens + completion_tokens
    if usage_format == "anthropic":
        uncached = max(prompt_tokens - cached_tokens - cache_write_tokens, 0)
        return {
            "prompt_tokens": uncached,
            "completion_tokens": completion_tokens,
            "total_tokens": total,
            "cache_read_input_tokens": cached_tokens,
            "cache_creation_input_tokens": cache_write_tokens,
        }
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": total,
    }
    if usage_format == "moonshot":
        usage["cached_tokens"] = cached_tokens
        return usage
    if usage_format == "deepseek":
        usage["prompt_cache_hit_tokens"] = cached_tokens
        usage["prompt_cache_miss_tokens"] = prompt_tokens - cached_tokens
    usage["prompt_tokens_details"] = {"cached_tokens": cached_tokens}
    if usage_format == "openai":
        usage["prompt_tokens_details"]["audio_tokens"] = 0
        usage["completion_tokens_details"] = {
            "reasoning_tokens": reasoning_tokens,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        }
    elif usage_format == "deepseek":
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning_tokens}
    return usage
