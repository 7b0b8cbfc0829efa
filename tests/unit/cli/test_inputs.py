from __future__ import annotations

import io
from pathlib import Path

import pytest

from swarm.cli.inputs import read_inputs, read_schema
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


def test_skip_empty_skips_empty_files_with_one_line_each(tmp_path: Path) -> None:
    full, empty = tmp_path / "a.py", tmp_path / "b.py"
    full.write_text("x = 1\n")
    empty.write_text("  \n")
    with pytest.raises(InputError, match="--skip-empty"):
        read_inputs([str(full), str(empty)])
    said: list[str] = []
    items = read_inputs([str(full), str(empty)], skip_empty=True, warn=said.append)
    assert [i.ref for i in items] == [str(full)]
    assert said == [f"swarm: skipped {empty}: empty file"]


def test_output_schema_files_are_checked(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_text('{"type": "object", "properties": {"n": {"type": "integer"}}}')
    assert read_schema(good)["type"] == "object"
    for text, message in [
        ("{", "not JSON"),
        ("[1]", "is an object"),
        ('{"type": 3}', "not a valid"),
    ]:
        bad = tmp_path / "bad.json"
        bad.write_text(text)
        with pytest.raises(InputError, match=message):
            read_schema(bad)
