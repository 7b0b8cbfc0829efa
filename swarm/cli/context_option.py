"""``--context FILE...``: the job's shared context, read from files (run, review, analyze).

The files' texts, each under a ``File: NAME`` line, become the job's ``context``: every
sub-agent and the aggregation read it in their shared prompt prefix (swarm.jobs.prompts),
which gateways bill at their cached price after the first call (swarm.calls.warmup).
`swarm review` adds the repository's own conventions file when it has one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import click

from swarm.errors import InputError

F = TypeVar("F", bound=Callable[..., object])

CONVENTION_FILES = ("CONVENTIONS.md", "AGENTS.md", "CONTRIBUTING.md")
"""Files of a repository's root that state its conventions; `swarm review` shares the
first one found with every reviewer."""


def context_option(fn: F) -> F:
    """``fn`` with ``--context FILE`` (repeatable; parameter ``context_files``)."""
    return click.option(
        "--context",
        "context_files",
        multiple=True,
        type=click.Path(path_type=Path),
        help="A file every sub-agent and the aggregation read before their own input "
        "(repeatable); the shared prompt prefix is billed at the cached price once warm.",
    )(fn)


def read_context(paths: Sequence[Path]) -> str | None:
    """The shared context of ``paths`` (None without any); InputError for a file that
    cannot be read as text."""
    parts = []
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"--context {path}: cannot read it as text ({exc})") from None
        parts.append(f"File: {path.name}\n\n{text.strip()}")
    return "\n\n".join(parts) or None


def conventions(repo: Path) -> list[Path]:
    """The repository's conventions file (the first of CONVENTION_FILES it has), if any."""
    for name in CONVENTION_FILES:
        if (repo / name).is_file():
            return [repo / name]
    return []
