from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from swarm.errors import InputError
from swarm.sources.git import commit_ids, commit_inputs


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    git(tmp_path, "init", "-q", "-b", "main")
    git(tmp_path, "config", "user.email", "t@example.invalid")
    git(tmp_path, "config", "user.name", "Test")
    for i in range(4):
        (tmp_path / f"f{i}.py").write_text(f"x = {i}\n")
        if i == 2:
            (tmp_path / "logo.png").write_bytes(b"\x89PNG\x00\x01\x02" * 10)
        git(tmp_path, "add", "-A")
        git(tmp_path, "commit", "-q", "-m", f"commit number {i}")
    return tmp_path


def test_last_n_commits_oldest_first(repo: Path) -> None:
    items = commit_inputs(repo, last=2)
    assert [i.ref.split(" ", 1)[1] for i in items] == ["commit number 2", "commit number 3"]
    assert "+x = 2" in items[0].text and "Binary files" in items[0].text
    assert "\x00" not in items[0].text


def test_range(repo: Path) -> None:
    ids = commit_ids(repo)
    assert len(ids) == 4
    items = commit_inputs(repo, rev_range=f"{ids[0]}..{ids[2]}")
    assert len(items) == 2


def test_not_a_repo_and_bad_range(tmp_path: Path, repo: Path) -> None:
    with pytest.raises(InputError, match="not a git repository"):
        commit_ids(tmp_path / "nope")
    with pytest.raises(InputError, match="git rev-list"):
        commit_ids(repo, rev_range="nope..alsonope")
