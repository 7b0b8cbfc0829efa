"""A text file as an input: UTF-8, not binary (swarm.sources.text), not empty."""

from __future__ import annotations

from pathlib import Path

from swarm.errors import EmptyInputError, InputError
from swarm.records import InputItem
from swarm.sources.text import decode_text


def read_file(path: Path) -> InputItem:
    """A text file as an input; InputError for missing, binary, non-UTF-8 or empty files."""
    try:
        data = path.read_bytes()
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, not an input file") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None
    text = decode_text(data, str(path))
    if not text.strip():
        raise EmptyInputError(f"{path}: empty file")
    return InputItem(ref=str(path), text=text)
