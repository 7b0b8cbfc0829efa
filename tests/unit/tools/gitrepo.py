"""A small generated git repository for the repo toolset's tests."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

UTIL = "def ratio(a, b):\n    return a / b  # BUG: b may be zero when called from app\n"
APP_V1 = "from util import ratio\n\ndef share(x):\n    return x\n"
APP_V2 = "from util import ratio\n\ndef share(x, n):\n    return ratio(x, n)\n"


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}  # fmt: skip
    done = subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=env)
    return done.stdout.decode()


def make_repo(root: Path, message: str = "share() takes n") -> tuple[Path, str, str]:
    """A repo whose second commit calls ratio() in app.py; the bug is in util.py, which that
    commit does not touch. Returns (repo, first commit, second commit)."""
    repo = root / "repo"
    (repo / "src").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "src" / "util.py").write_text(UTIL)
    (repo / "src" / "app.py").write_text(APP_V1)
    os.symlink("util.py", repo / "src" / "link_in.py")
    os.symlink("../../outside.txt", repo / "src" / "link_out.txt")
    os.symlink("/etc/hostname", repo / "abs_link")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "first")
    first = git(repo, "rev-parse", "HEAD").strip()
    (repo / "src" / "app.py").write_text(APP_V2)
    git(repo, "commit", "-q", "-am", message)
    second = git(repo, "rev-parse", "HEAD").strip()
    (repo / "src" / "util.py").write_text("working tree only, never committed\n")
    (root / "outside.txt").write_text("secret outside the repository\n")
    return repo, first, second
