"""What the commands share when they are declared: the options of every job-submitting
command, and the one-line error contract (SwarmError -> `swarm: <message>`, exit status 2).

Light on purpose: every command module imports it, and `swarm --help` loads every command
module; the modules that run jobs are imported inside the commands' bodies.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import wraps
from typing import ParamSpec, TypeVar

import click

from swarm.errors import SwarmError

P = ParamSpec("P")
R = TypeVar("R")


JOB_OPTIONS = (
    click.option("--json", "as_json", is_flag=True, help="Print the report as JSON."),
    click.option("--no-wait", is_flag=True, help="Print the job id and return."),
    click.option("--simulate", is_flag=True, help="Embedded mode: use the built-in simulator."),
    click.option("--budget-usd", type=float, help="Cap on the job's cost in USD (see README)."),
    click.option(
        "--strict", is_flag=True, help="Refuse when the workers call another gateway than this."
    ),
)
"""The options every job-submitting command has (run, review, analyze)."""


def job_options(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` with JOB_OPTIONS (parameters as_json, no_wait, simulate, budget_usd, strict)."""
    for option in reversed(JOB_OPTIONS):
        fn = option(fn)
    return fn


def one_line_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Turn SwarmError into `swarm: <message>` on stderr and exit status 2."""

    @wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except SwarmError as exc:
            click.echo(f"swarm: {exc}", err=True)
            sys.exit(2)

    return wrapper
