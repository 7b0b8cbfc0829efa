"""Commits of a git repository as review inputs (one sub-agent per commit).

Uses the ``git`` command line (always present where a repository is); binary files appear
in ``git show`` only as "Binary files ... differ", so their content never reaches a prompt.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from swarm.errors import InputError
from swarm.records import InputItem

_SHOW_FORMAT = "commit %H%nAuthor: %an%nDate: %aI%n%n%B"


def run_git(repo: Path, *args: str) -> str:
    """The output of `git -C repo ARGS...`; InputError with git's last line when it fails."""
    try:
        done = subprocess.run(
            ["git", "-C", str(repo), *args], capture_output=True, timeout=120, check=False
        )
    except FileNotFoundError:
        raise InputError("git is not installed") from None
    if done.returncode != 0:
        reason = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise InputError(f"git {args[0]} in {repo}: {reason[-1] if reason else 'failed'}")
    return done.stdout.decode("utf-8", "replace")


def commit_ids(repo: Path, last: int | None = None, rev_range: str | None = None) -> list[str]:
    """Commit ids, oldest first: the last N of HEAD, or those of ``A..B``."""
    if not (repo / ".git").exists() and not _is_work_tree(repo):
        raise InputError(f"{repo}: not a git repository")
    args = ["rev-list", "--reverse", "--no-merges"]
    if last is not None:
        args += ["--max-count", str(last)]
    ids = run_git(repo, *args, rev_range or "HEAD").split()
    if last is not None and rev_range is None:
        ids = ids[-last:]
    if not ids:
        raise InputError(f"{repo}: no commits in {rev_range or 'HEAD'}")
    return ids


def _is_work_tree(repo: Path) -> bool:
    try:
        return run_git(repo, "rev-parse", "--is-inside-work-tree").strip() == "true"
    except InputError:
        return False


def commit_input(repo: Path, commit: str) -> InputItem:
    """One commit's message and patch (binary files named, not shown)."""
    text = run_git(
        repo, "show", "--no-color", "--stat", "--patch", f"--format={_SHOW_FORMAT}", commit
    )
    subject = run_git(repo, "log", "-1", "--format=%s", commit).strip()
    return InputItem(ref=f"{commit[:12]} {subject}"[:120], text=text)


def commit_inputs(
    repo: Path, last: int | None = None, rev_range: str | None = None
) -> list[InputItem]:
    """Every selected commit as an input, oldest first."""
    return [commit_input(repo, c) for c in commit_ids(repo, last, rev_range)]
