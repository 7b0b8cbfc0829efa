"""Expected prompt-cache hits of a job and what they save (the pre-flight's second figure).

A job whose shared prompt prefix (role, instruction, shared context) reaches its model's
``cache_min_prefix_tokens`` is billed that prefix at the cached price on every call but
the first, when the cache warm-up runs (swarm.calls.warmup): the first node calls alone,
the others find the prefix cached. Without the warm-up the first wave of calls all miss,
so no hit is counted. A batch file's lines are not ordered by the warm-up and their hits
are up to the provider, so a job whose nodes go into batch files counts none either.
"""

from __future__ import annotations

from swarm.catalog import ModelSpec
from swarm.cost.pricing import cost_nusd, cost_usd
from swarm.records import Usage


def warms(model: ModelSpec, prefix_tokens: int, calls: int, min_tokens: int | None) -> bool:
    """Whether a fan-out of ``calls`` sharing a prefix of ``prefix_tokens`` is warmed first:
    the model caches prompts, the prefix reaches its minimum and ``min_tokens`` (the
    warm-up's own floor; None = the warm-up is off), and more than one call shares it."""
    threshold = model.cache_min_prefix_tokens
    if min_tokens is None or threshold <= 0 or calls < 2:
        return False
    return prefix_tokens >= max(threshold, min_tokens)


def expected_cached_tokens(
    model: ModelSpec, prefix_tokens: int, calls: int, *, warmup_min_tokens: int | None
) -> int:
    """Prompt tokens a job's ``calls`` on ``model`` should find cached (``warms``)."""
    if not warms(model, prefix_tokens, calls, warmup_min_tokens):
        return 0
    return (calls - 1) * prefix_tokens


def cache_saving_nusd(model: ModelSpec, cached_tokens: int) -> int:
    """What ``cached_tokens`` cost less at the cached price than at the input price."""
    full = cost_nusd(model, Usage(prompt_tokens=cached_tokens))
    return full - cost_nusd(model, Usage(prompt_tokens=cached_tokens, cached_tokens=cached_tokens))


def cache_saved_usd(model: ModelSpec, usage: Usage, discount: float = 1.0) -> float:
    """What ``usage``'s cached tokens saved against their full input price (times a batch
    ``discount`` for batch lines, whose every price is the live one times it)."""
    full = cost_usd(model, usage.model_copy(update={"cached_tokens": 0}))
    return (full - cost_usd(model, usage)) * discount
