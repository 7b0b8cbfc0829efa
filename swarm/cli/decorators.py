"""What the commands share when they are declared: the options of the job commands (one
declaration each, so `run`, `review`, `analyze` and `resume` spell and explain them alike;
`run`, `review` and `analyze` get theirs as one JobFlags), the top-level group's help, and
the one-line error contract (SwarmError -> `swarm: <message>`, exit status 2; Ctrl-C ->
exit status 130, no traceback).

Light on purpose: every command module imports it, and `swarm --help` loads every command
module; the modules that run jobs are imported inside the commands' bodies.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, fields
from functools import wraps
from typing import Any, ParamSpec, TypeVar

import click

from swarm.errors import InputError, SwarmError

P = ParamSpec("P")
R = TypeVar("R")

CONTEXT_SETTINGS: dict[str, Any] = {"help_option_names": ["-h", "--help"]}
"""`-h` as well as `--help`, on the group and (inherited) on every command."""
INTERRUPTED = 130
"""Exit status after Ctrl-C (128 + SIGINT), as shells report it."""
SHORT_HELP_CHARS = 400
"""The command list shows each command's first sentence whole (wrapped, never cut)."""
MAX_JOB_ID_CHARS = 128
"""Longest job id a command takes (swarm's own are 32 hex digits)."""
SHOWN_ID_CHARS = 32
"""Characters of a refused job id echoed back (then an ellipsis)."""


class SwarmGroup(click.Group):
    """A group whose command list wraps each command's first sentence instead of cutting
    it at the terminal's width with `...`."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(SHORT_HELP_CHARS)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


JSON = click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
NO_WAIT = click.option("--no-wait", is_flag=True, help="Print the job id and return.")
TIMEOUT = click.option(
    "--timeout",
    "timeout_s",
    type=float,
    default=None,
    help="Stop waiting after S seconds (the job keeps running).",
)
SIMULATE = click.option(
    "--simulate", is_flag=True, help="Embedded mode: use the built-in simulator."
)
BUDGET = click.option(
    "--budget-usd", type=float, help="Cap on the job's cost in USD: calls that would pass it "
    "are not made (a command with --force also refuses a job whose estimate passes it).",
)  # fmt: skip
STRICT = click.option(
    "--strict", is_flag=True, help="Refuse when the workers call another gateway than this."
)
TENANT = click.option(
    "--tenant",
    envvar="SWARM_TENANT",
    default="default",  # swarm.records.DEFAULT_TENANT (records would load pydantic at start)
    show_default=True,
    help="Team the job runs for: busy models share tokens between teams by the catalog's "
    "[tenants] weights (env SWARM_TENANT).",
)
MAX_TOKENS = click.option(
    "--max-tokens", type=click.IntRange(min=1), help="Completion cap per sub-agent."
)
FORCE = click.option(
    "--force", is_flag=True, help="Run even if the estimate passes --budget-usd (until spent)."
)

JOB_OPTIONS = (JSON, NO_WAIT, SIMULATE, BUDGET, STRICT, TIMEOUT, TENANT)
"""The options of every job-submitting command (run, review, analyze)."""
LIMIT_OPTIONS = (MAX_TOKENS, FORCE)
"""The options of the commands whose sub-agents' answers are capped and priced up front
(run, review; analyze takes MAX_TOKENS alone: its plan decides the calls, so its budget is
not checked up front)."""
RESUME_OPTIONS = (JSON, NO_WAIT, STRICT, TIMEOUT)
"""The options of `resume` that the job commands share (it takes a new --budget-usd of its
own: the default keeps the job's)."""


def _with(options: tuple[Callable[[Any], Any], ...], fn: Callable[P, R]) -> Callable[P, R]:
    for option in reversed(options):
        fn = option(fn)
    return fn


@dataclass(frozen=True)
class JobFlags:
    """What JOB_OPTIONS gave a job command: how its job is submitted and waited for."""

    as_json: bool
    """Print the report as JSON."""
    no_wait: bool
    """Print the job id and return."""
    simulate: bool
    """Embedded mode with the built-in simulator."""
    budget_usd: float | None
    """Cap on the job's cost (None: the catalog's)."""
    strict: bool
    """Refuse when the workers call another gateway."""
    timeout_s: float | None
    """Stop waiting after this long (the job keeps running)."""
    tenant: str
    """Team the job runs for."""

    def check(self) -> None:
        """Refuse a bad --budget-usd, --timeout or --tenant before anything is submitted."""
        from swarm.cost.budget import check_budget
        from swarm.records import check_tenant

        check_budget(self.budget_usd)
        check_timeout(self.timeout_s)
        check_tenant(self.tenant)


_JOB_FLAGS = tuple(field.name for field in fields(JobFlags))


def job_options(fn: Callable[..., R]) -> Callable[..., R]:
    """``fn`` with JOB_OPTIONS, given to it as one parameter ``job`` (a JobFlags)."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> R:
        job = JobFlags(**{name: kwargs.pop(name) for name in _JOB_FLAGS})
        return fn(*args, job=job, **kwargs)

    return _with(JOB_OPTIONS, wrapper)


def limit_options(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` with LIMIT_OPTIONS (parameters max_tokens, force)."""
    return _with(LIMIT_OPTIONS, fn)


def resume_options(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` with RESUME_OPTIONS (parameters as_json, no_wait, strict, timeout_s)."""
    return _with(RESUME_OPTIONS, fn)


def one_line_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Turn SwarmError into `swarm: <message>` on stderr and exit status 2, and Ctrl-C
    (outside a wait, which says more: swarm.cli.follow) into `swarm: interrupted`, 130."""

    @wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except SwarmError as exc:
            click.echo(f"swarm: {exc}", err=True)
            sys.exit(2)
        except KeyboardInterrupt:
            click.echo("\nswarm: interrupted", err=True)
            sys.exit(INTERRUPTED)

    return wrapper


def check_timeout(timeout_s: float | None) -> None:
    """Refuse a ``--timeout`` that is not a positive number, before anything is submitted."""
    if timeout_s is not None and not 0 < timeout_s < float("inf"):
        raise InputError(f"--timeout must be a positive number of seconds, not {timeout_s:g}")


def check_job_id(job_id: str) -> str:
    """``job_id`` when it can be one (printable, at most MAX_JOB_ID_CHARS characters);
    else InputError quoting its start only, so a pasted file is not echoed back whole."""
    if len(job_id) <= MAX_JOB_ID_CHARS and job_id.isprintable():
        return job_id
    shown = job_id[:SHOWN_ID_CHARS] + ("\u2026" if len(job_id) > SHOWN_ID_CHARS else "")
    raise InputError(
        f"{shown!r} ({len(job_id)} characters) is not a job id: job ids are at most "
        f"{MAX_JOB_ID_CHARS} printable characters (`swarm jobs` lists the recent ones)"
    )
