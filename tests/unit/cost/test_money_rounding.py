"""Money in JSON has no float noise: amounts are rounded to a millionth of a unit."""

from __future__ import annotations

from swarm.cost.projections import money


def test_money_drops_float_noise() -> None:
    assert money(0.7681790000000001) == 0.768179
    assert money(0.1 + 0.2) == 0.3
    assert money(1e-7) == 0.0
