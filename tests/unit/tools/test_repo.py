from __future__ import annotations

from pathlib import Path

import pytest
from gitrepo import make_repo

from swarm.tools.repo import PathRefused, Repo, clean_path, commit_of


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Repo, Repo]:
    root, first, second = make_repo(tmp_path)
    return Repo(root, first), Repo(root, second)


@pytest.mark.parametrize(
    ("path", "refused"),
    [
        ("src/app.py", None),
        ("./src//app.py", None),
        ("", None),
        ("../outside.txt", "'..' is refused"),
        ("src/../../outside.txt", "'..' is refused"),
        ("/etc/passwd", "absolute paths"),
        ("C:/x", "absolute paths"),
        (":(top)src", "pathspec magic"),
    ],
)
def test_paths_stay_inside(path: str, refused: str | None) -> None:
    if refused is None:
        assert not clean_path(path).startswith(("/", ".."))
    else:
        with pytest.raises(PathRefused, match=refused):
            clean_path(path)


def test_reads_git_objects_at_the_commit_not_the_working_tree(repo: tuple[Repo, Repo]) -> None:
    first, second = repo
    util = second.read_file("src/util.py")
    assert "BUG: b may be zero" in util and "working tree only" not in util
    assert "def share(x):" in first.read_file("src/app.py")
    assert "def share(x, n):" in second.read_file("src/app.py", 3, 4)
    assert second.read_file("src/app.py", 3, 3).splitlines()[1].strip() == "3  def share(x, n):"


def test_symlinks_followed_inside_refused_outside(repo: tuple[Repo, Repo]) -> None:
    _, second = repo
    assert "BUG" in second.read_file("src/link_in.py")
    with pytest.raises(PathRefused, match="symlink out of the repository"):
        second.read_file("src/link_out.txt")
    with pytest.raises(PathRefused, match="symlink out of the repository"):
        second.read_file("abs_link")
    with pytest.raises(PathRefused, match="no such file"):
        second.read_file("src/missing.py")


def test_grep_and_list_dir(repo: tuple[Repo, Repo]) -> None:
    _, second = repo
    assert "src/util.py:2:" in second.grep("BUG")
    assert second.grep("ratio", "src/app.py").splitlines()[0].startswith("src/app.py:1:")
    assert second.grep("no-such-text-anywhere") == "no matches"
    with pytest.raises(PathRefused):
        second.grep("x", "../*")
    assert second.list_dir(".").splitlines() == ["abs_link", "src/"]
    assert "util.py" in second.list_dir("src").splitlines()
    with pytest.raises(PathRefused):
        second.list_dir("..")


def test_commit_of_an_input_reference() -> None:
    assert commit_of("0123456789ab fix the thing") == "0123456789ab"
    assert commit_of("notes.md") == "HEAD"
