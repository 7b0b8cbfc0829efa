"""Hierarchical aggregation: reduce results in groups until they fit one aggregation call.

Packing is first-fit in input order (results stay next to their neighbours); an item larger
than the budget travels alone and is cut by the prompt builder.
"""

from __future__ import annotations

from collections.abc import Sequence


def pack(sizes: Sequence[int], budget: int) -> list[list[int]]:
    """Indices of ``sizes`` grouped so each group's total is at most ``budget``."""
    groups: list[list[int]] = []
    start = 0
    for length in group_lengths(sizes, budget):
        groups.append(list(range(start, start + length)))
        start += length
    return groups


def needs_reduction(sizes: Sequence[int], budget: int) -> bool:
    """True when the items do not fit one call."""
    return sum(sizes) > budget and len(sizes) > 1


def levels_after(groups: int, item_tokens: int, budget: int, cap: int) -> int:
    """How many more reduce levels ``groups`` results of at most ``item_tokens`` each can
    need before they fit ``budget`` (at most ``cap``): an upper bound, as every reduced
    result is counted at its full size."""
    levels, count = 0, groups
    while levels < cap and needs_reduction([item_tokens] * count, budget):
        count = len(pack([item_tokens] * count, budget))
        levels += 1
    return levels


def group_lengths(sizes: Sequence[int], budget: int) -> list[int]:
    """How many items each group of ``pack(sizes, budget)`` takes (its groups are runs of
    consecutive items, so the lengths say where each one starts)."""
    lengths: list[int] = []
    total = 0
    for size in sizes:
        if lengths and total + size <= budget:
            lengths[-1] += 1
            total += size
        else:
            lengths.append(1)
            total = size
    return lengths
