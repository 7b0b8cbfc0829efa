"""The ``repo`` toolset: read-only tools over a git repository at one commit.

Everything is read from git objects at the node's commit (the first word of its input
reference, as `swarm review` writes it; HEAD otherwise), never from the working tree.
Paths are confined to the repository: absolute paths, ``..`` and pathspec magic are
refused, and a symlink is followed only while its target stays inside the tree.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence
from pathlib import Path

from swarm.errors import InputError
from swarm.sources.git import run_git
from swarm.tools.registry import Tool, line_range, make_tool

MAX_MATCHES = 200
"""Lines one grep returns at most."""
SYMLINK_MODE = "120000"
_MAX_LINKS = 8
_COMMIT = re.compile(r"^[0-9a-f]{7,40}$")


class PathRefused(ValueError):
    """A path that would leave the repository, or names nothing in it."""


def clean_path(path: str) -> str:
    """``path`` relative to the repository root, normalised; PathRefused when it leaves it."""
    if path in ("", ".", "./"):
        return ""
    if path.startswith(("/", "\\", ":")) or re.match(r"^[A-Za-z]:", path) or "\0" in path:
        raise PathRefused(f"{path!r}: absolute paths and pathspec magic are refused")
    parts = [p for p in path.replace("\\", "/").split("/") if p not in ("", ".")]
    if ".." in parts:
        raise PathRefused(f"{path!r}: '..' is refused: paths stay inside the repository")
    return "/".join(parts)


class Repo:
    """One repository at one commit."""

    def __init__(self, root: Path, rev: str) -> None:
        self.root = root
        self.rev = rev

    def _git(self, *args: str) -> str:
        try:
            return run_git(self.root, *args)
        except InputError as exc:
            raise PathRefused(str(exc)) from None

    def entry(self, path: str) -> tuple[str, str] | None:
        """(mode, type) of ``path`` at the commit, or None when absent."""
        out = self._git("ls-tree", self.rev, "--", path).strip()
        if not out:
            return None
        mode, kind, _ = out.split(" ", 2)
        return mode, kind

    def resolve(self, path: str) -> str:
        """``path`` with symlinks followed inside the tree; PathRefused when one leaves it."""
        current = clean_path(path)
        for _ in range(_MAX_LINKS):
            if not current:
                return current
            entry = self.entry(current)
            if entry is None:
                raise PathRefused(f"{path!r}: no such file at {self.rev[:12]}")
            if entry[0] != SYMLINK_MODE:
                return current
            target = self._git("cat-file", "blob", f"{self.rev}:{current}")
            joined = posixpath.normpath(posixpath.join(posixpath.dirname(current), target))
            if target.startswith("/") or joined == ".." or joined.startswith("../"):
                raise PathRefused(f"{path!r}: a symlink out of the repository is refused")
            current = clean_path(joined)
        raise PathRefused(f"{path!r}: too many symlinks")

    def read_file(self, path: str, start_line: int = 1, end_line: int = 200) -> str:
        """Lines ``start_line``..``end_line`` (1-based, inclusive) of a file, numbered."""
        real = self.resolve(path)
        entry = self.entry(real) if real else ("040000", "tree")
        if entry is None or entry[1] != "blob":
            raise PathRefused(f"{path!r} is not a file (use list_dir for directories)")
        lines = self._git("cat-file", "blob", f"{self.rev}:{real}").splitlines()
        return line_range(real, lines, start_line, end_line)

    def list_dir(self, path: str = ".") -> str:
        """Entries of a directory, directories with a trailing slash."""
        real = self.resolve(path)
        tree = f"{self.rev}:{real}" if real else f"{self.rev}^{{tree}}"
        names = []
        for line in self._git("ls-tree", tree).splitlines():
            meta, name = line.split("\t", 1)
            names.append(name + "/" if meta.split(" ")[1] == "tree" else name)
        return "\n".join(names) or "(empty)"

    def grep(self, pattern: str, path_glob: str = "*") -> str:
        """Lines matching a regular expression, as ``path:line: text``."""
        glob = clean_path(path_glob) or "*"
        try:
            out = run_git(self.root, "grep", "-n", "-I", "-E", "-e", pattern, self.rev, "--", glob)
        except InputError as exc:
            if "failed" in str(exc):  # git grep exits 1 when nothing matches
                return "no matches"
            raise PathRefused(str(exc)) from None
        prefix = f"{self.rev}:"
        lines = [line.removeprefix(prefix) for line in out.splitlines()]
        if len(lines) > MAX_MATCHES:
            lines = [*lines[:MAX_MATCHES], f"[... {len(lines) - MAX_MATCHES} more matches ...]"]
        return "\n".join(lines) or "no matches"


def commit_of(input_ref: str) -> str:
    """The commit a review node reads: the first word of its input reference, else HEAD."""
    first = input_ref.split(" ", 1)[0]
    return first if _COMMIT.match(first) else "HEAD"


def toolset(root: str | None, input_ref: str) -> Sequence[Tool]:
    """read_file, grep and list_dir over ``root`` at the node's commit."""
    if root is None:
        raise PathRefused("the repo toolset needs a repository (swarm review --agent sets it)")
    repo = Repo(Path(root), commit_of(input_ref))

    def read_file(path: str, start_line: int = 1, end_line: int = 200) -> str:
        """Read lines start_line..end_line (1-based, inclusive) of a file of the repository
        at the reviewed commit. Paths are relative to the repository root."""
        return repo.read_file(path, start_line, end_line)

    def grep(pattern: str, path_glob: str = "*") -> str:
        """Search the repository at the reviewed commit for a regular expression; returns
        path:line: text for each match. path_glob limits the files, e.g. 'src/*.py'."""
        return repo.grep(pattern, path_glob)

    def list_dir(path: str = ".") -> str:
        """List a directory of the repository at the reviewed commit."""
        return repo.list_dir(path)

    return [make_tool(read_file), make_tool(grep), make_tool(list_dir)]
