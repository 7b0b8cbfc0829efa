"""Cost of billed tokens from the catalog's prices, in USD and in exact nano-USD.

Budgets are counted in Redis with integer arithmetic, so each call's cost is also
computed as an integer number of nano-USD (1e-9 USD) from the decimal prices (a price of
0.026 USD per million tokens is exactly 26 nano-USD per token), so no float drift adds up.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

from swarm.catalog import ModelSpec
from swarm.records import Usage

_PER = 1_000_000
NANO_PER_USD = 1_000_000_000
"""nano-USD in one USD."""
_NANO_PER_TOKEN_PER_MTOK = Decimal(NANO_PER_USD // _PER)
"""A price in USD per million tokens times this is nano-USD per token."""


def cost_usd(spec: ModelSpec, usage: Usage) -> float:
    """USD for ``usage`` on ``spec``: uncached input, cached input and output at their prices."""
    cached = min(usage.cached_tokens, usage.prompt_tokens)
    uncached = usage.prompt_tokens - cached
    return (
        uncached * spec.input_per_mtok_usd
        + cached * spec.cached_input_per_mtok_usd
        + usage.completion_tokens * spec.output_per_mtok_usd
    ) / _PER


def _nano(price_per_mtok_usd: float) -> Decimal:
    # repr() gives the shortest decimal that round-trips, so 0.026 stays 0.026 exactly.
    return Decimal(repr(price_per_mtok_usd)) * _NANO_PER_TOKEN_PER_MTOK


def cost_nusd(spec: ModelSpec, usage: Usage) -> int:
    """``cost_usd`` in nano-USD, rounded half up to an integer (for budget counters)."""
    cached = min(usage.cached_tokens, usage.prompt_tokens)
    uncached = usage.prompt_tokens - cached
    exact = (
        uncached * _nano(spec.input_per_mtok_usd)
        + cached * _nano(spec.cached_input_per_mtok_usd)
        + usage.completion_tokens * _nano(spec.output_per_mtok_usd)
    )
    return int(exact.to_integral_value(rounding=ROUND_HALF_UP))


def nusd_of_usd(usd: float) -> int:
    """An amount in USD as nano-USD, rounded half up."""
    exact = Decimal(repr(usd)) * NANO_PER_USD
    return int(exact.to_integral_value(rounding=ROUND_HALF_UP))


def usd_of_nusd(nusd: int) -> float:
    """nano-USD as USD."""
    return nusd / NANO_PER_USD


SMALLEST_SHOWN_USD = 0.0001
"""Amounts are shown to this (four places, whatever their size, so amounts side by side
line up); a smaller one that is not zero shows two significant digits, so a small
simulated job is not shown as $0.0000."""


def usd_text(usd: float, *, sign: bool = True) -> str:
    """Every amount swarm shows, one format: ``$1,234.5678``, ``$0.1152``, and
    ``$0.000042`` below a hundredth of a cent; ``sign=False`` drops the ``$`` (a
    table's column named "USD")."""
    size = abs(usd)
    places = 4 if size >= SMALLEST_SHOWN_USD or usd == 0 else _places(size)
    return ("$" if sign else "") + f"{usd:,.{places}f}"


def _places(size: float) -> int:
    """Decimal places that show two significant digits of ``size`` (0 < size < 1)."""
    places = 0
    while size < 0.1:
        size *= 10
        places += 1
    return places + 2
