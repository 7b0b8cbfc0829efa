"""Reading `swarm run` inputs: files, or one input per line from stdin."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from swarm.errors import InputError
from swarm.records import InputItem
from swarm.sources.files import read_file


def read_inputs(args: Sequence[str], stdin: TextIO | None = None) -> list[InputItem]:
    """One InputItem per file; ``-`` adds one per non-empty stdin line."""
    if not args:
        raise InputError("no inputs: give one or more files, or - to read lines from stdin")
    items: list[InputItem] = []
    for arg in args:
        if arg == "-":
            items.extend(_stdin_items(stdin or sys.stdin))
        else:
            items.append(read_file(Path(arg)))
    if not items:
        raise InputError("no inputs: stdin had no non-empty lines")
    return items


def _stdin_items(stream: TextIO) -> list[InputItem]:
    return [
        InputItem(ref=f"stdin:{n}", text=line.rstrip("\n"))
        for n, line in enumerate(stream, start=1)
        if line.strip()
    ]
