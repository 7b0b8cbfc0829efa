"""Cost of billed tokens from the catalog's prices."""

from __future__ import annotations

from swarm.catalog import ModelSpec
from swarm.records import Usage

_PER = 1_000_000


def cost_usd(spec: ModelSpec, usage: Usage) -> float:
    """USD for ``usage`` on ``spec``: uncached input, cached input and output at their prices."""
    cached = min(usage.cached_tokens, usage.prompt_tokens)
    uncached = usage.prompt_tokens - cached
    return (
        uncached * spec.input_per_mtok_usd
        + cached * spec.cached_input_per_mtok_usd
        + usage.completion_tokens * spec.output_per_mtok_usd
    ) / _PER
