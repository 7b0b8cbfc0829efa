"""The ``swarm sim --batch-*`` options: the simulated Batch API (swarm.sim.batch)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])
PREFIX = "batch_"

_OPTIONS = (
    click.option("--batch-processing-s", type=float, help="Seconds a batch is in_progress."),
    click.option("--batch-validating-s", type=float, help="Seconds a batch is validating."),
    click.option("--batch-finalizing-s", type=float, help="Seconds a batch is finalizing."),
    click.option("--batch-cancel-s", type=float, help="Seconds a cancelled batch is cancelling."),
    click.option("--batch-expire-s", type=float, help="A batch not done by then expires."),
    click.option("--batch-failed-rate", type=float, help="Share of batch lines that fail."),
    click.option("--batch-discount", type=float, help="Batch price / live price (0.5)."),
    click.option("--batch-max-lines", type=int, help="Lines a batch file may hold."),
    click.option(
        "--batch-refused-field",
        "batch_refused_fields",
        multiple=True,
        default=None,
        help="Body field a batch line may not carry (repeatable).",
    ),
    click.option("--batch-one-model", is_flag=True, default=None, help="One model per file."),
    click.option(
        "--no-batch",
        "batch_enabled",
        flag_value=False,
        default=None,
        help="No Batch API (its routes answer 404).",
    ),
)


def batch_options(command: F) -> F:
    """Add the --batch-* options to a click command."""
    for option in reversed(_OPTIONS):
        command = option(command)
    return command


def nest_batch(options: dict[str, Any]) -> dict[str, Any]:
    """The options with the given ``batch_*`` ones moved into ``batch`` (a dict)."""
    batch = {
        name.removeprefix(PREFIX): value
        for name, value in options.items()
        if name.startswith(PREFIX) and value not in (None, ())
    }
    rest = {name: value for name, value in options.items() if not name.startswith(PREFIX)}
    return {**rest, "batch": batch} if batch else rest
