"""Durations of --deadline."""

from __future__ import annotations

import pytest

from swarm.cli.duration import parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90.0), ("30m", 1800.0), ("24h", 86400.0), ("1h30m", 5400.0), ("2d", 172800.0),
     ("45", 45.0), ("1.5h", 5400.0)],
)  # fmt: skip
def test_durations_in_seconds(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "30x", "0m", "-5", "1h 30m"])
def test_what_is_not_a_positive_duration_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)
