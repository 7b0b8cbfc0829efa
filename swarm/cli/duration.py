"""Durations on the command line: ``90s``, ``30m``, ``24h``, ``1h30m``, ``2d`` (or seconds)."""

from __future__ import annotations

import re
from typing import Any

import click

UNITS_S = {"d": 86_400.0, "h": 3_600.0, "m": 60.0, "s": 1.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)([dhms])")


def parse_duration(text: str) -> float:
    """Seconds in ``text``; ValueError when it is not a positive duration."""
    cleaned = text.strip().lower()
    try:
        seconds = float(cleaned)
    except ValueError:
        parts = _PART.findall(cleaned)
        if not parts or "".join(n + u for n, u in parts) != cleaned:
            raise ValueError(f"{text!r} is not a duration (e.g. 90s, 30m, 24h, 1h30m)") from None
        seconds = sum(float(n) * UNITS_S[u] for n, u in parts)
    if seconds <= 0:
        raise ValueError(f"{text!r} is not a positive duration")
    return seconds


class Duration(click.ParamType[float]):
    """A click parameter of ``parse_duration``'s form, as seconds."""

    name = "duration"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        if isinstance(value, float | int):
            return float(value)
        try:
            return parse_duration(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


DEADLINE_HELP = (
    "End the job within this long (30m, 24h): sub-agents without tools on models with "
    "`batch = true` in the catalog go through the gateway's Batch API at its price while "
    "the deadline allows."
)
DEADLINE = click.option(
    "--deadline", "deadline_s", type=Duration(), default=None, help=DEADLINE_HELP
)
"""The ``--deadline`` option of the job commands (parameter ``deadline_s``)."""
