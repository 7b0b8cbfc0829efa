"""One rule for a text whatever its source: the bytes refused in a file are refused on
stdin, with the same words, as one line and exit 2 (nothing is submitted)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from swarm.cli.main import main

CLEAN = ("SWARM_BROKER_URL", "SWARM_BASE_URL", "SWARM_API_KEY", "OPENAI_API_KEY", "SWARM_CONFIG")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in CLEAN:
        monkeypatch.delenv(name, raising=False)


NOWHERE = {"SWARM_BROKER_URL": "redis://127.0.0.1:1/0", "SWARM_BASE_URL": "http://127.0.0.1:1/v1"}
"""A deployment nothing answers at: input accepted by mistake fails fast, on the gateway."""


def refusal(argv: list[str], stdin: bytes = b"") -> str:
    result = CliRunner().invoke(main, argv, input=stdin, env=NOWHERE)
    assert result.exit_code == 2, (result.output, result.exception)
    err = result.stderr
    assert err.startswith("swarm: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err.strip()


@pytest.mark.parametrize(
    ("data", "file_says", "stdin_says"),
    [
        (b"ab\xffcd\n", "not UTF-8 text (byte 2)", "stdin:1: not UTF-8 text (byte 2)"),
        (b"a\0b\n", "binary file (contains NUL bytes)", "stdin:1: binary input (contains NUL"),
    ],
    ids=["not UTF-8", "NUL bytes"],
)
def test_stdin_is_refused_as_a_file_is(
    tmp_path: Path, data: bytes, file_says: str, stdin_says: str
) -> None:
    path = tmp_path / "in.txt"
    path.write_bytes(data)
    assert refusal(["run", str(path), "--no-wait"]).endswith(file_says)
    assert stdin_says in refusal(["run", "-", "--no-wait"], stdin=data)


def test_a_nul_byte_far_into_a_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "late.txt"
    path.write_bytes(b"text\n" * 4000 + b"\0")
    assert "binary file (contains NUL bytes)" in refusal(["run", str(path), "--no-wait"])
