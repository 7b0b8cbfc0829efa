from __future__ import annotations

import io
from pathlib import Path

import pytest

from swarm.cli.inputs import read_inputs
from swarm.errors import InputError


def test_files_and_stdin_lines(tmp_path: Path) -> None:
    f = tmp_path / "a.diff"
    f.write_text("diff one")
    items = read_inputs([str(f), "-"], stdin=io.StringIO("first\n\n  \nsecond\n"))
    assert [(i.ref, i.text) for i in items] == [
        (str(f), "diff one"),
        ("stdin:1", "first"),
        ("stdin:4", "second"),
    ]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "empty file"),
        (b"  \n\t", "empty file"),
        (b"\x89PNG\r\n\x1a\n\x00\x00", "binary file"),
        (b"caf\xe9 latin-1", "not UTF-8"),
    ],
)
def test_unusable_files_are_one_line_errors(tmp_path: Path, content: bytes, message: str) -> None:
    f = tmp_path / "input"
    f.write_bytes(content)
    with pytest.raises(InputError, match=message) as err:
        read_inputs([str(f)])
    assert "\n" not in str(err.value)


def test_missing_directory_and_no_inputs(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read"):
        read_inputs([str(tmp_path / "missing")])
    with pytest.raises(InputError, match="is a directory"):
        read_inputs([str(tmp_path)])
    with pytest.raises(InputError, match="no inputs"):
        read_inputs([])
    with pytest.raises(InputError, match="no inputs"):
        read_inputs(["-"], stdin=io.StringIO("\n\n"))
