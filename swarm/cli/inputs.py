"""Reading `swarm run` inputs: files, or one input per line from stdin."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

import jsonschema

from swarm.errors import EmptyInputError, InputError
from swarm.records import InputItem
from swarm.sources.files import read_file
from swarm.sources.spool import SpooledLines, StreamedInputs


def read_inputs(
    args: Sequence[str],
    stdin: IO[str] | IO[bytes] | None = None,
    skip_empty: bool = False,
    warn: Callable[[str], None] = print,
) -> StreamedInputs:
    """One InputItem per file; ``-`` adds one per non-empty stdin line, spooled to a
    temporary file and read back as the submit goes (swarm.sources.spool), each line held
    to the rule of a file's text (stdin is read as bytes: UTF-8 whatever the locale). An
    empty file refuses the job, or with ``skip_empty`` is skipped with one ``warn`` line."""
    if not args:
        raise InputError("no inputs: give one or more files, or - to read lines from stdin")
    segments: list[list[InputItem] | SpooledLines] = []
    files: list[InputItem] = []
    for arg in args:
        if arg == "-":
            segments += [files, SpooledLines(stdin or sys.stdin.buffer)]
            files = []
            continue
        try:
            files.append(read_file(Path(arg)))
        except EmptyInputError as exc:
            if not skip_empty:
                raise InputError(f"{exc} (--skip-empty skips empty files)") from None
            warn(f"swarm: skipped {exc}")
    items = StreamedInputs([*segments, files])
    if not items:
        items.close()
        raise InputError("no inputs: nothing but empty input")
    return items


def read_schema(path: Path) -> dict[str, Any]:
    """A JSON Schema file for ``--output-schema``; InputError names what is wrong."""
    try:
        schema = json.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read the schema ({exc})") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not JSON (line {exc.lineno}: {exc.msg})") from None
    if not isinstance(schema, dict):
        raise InputError(f"{path}: a JSON Schema is an object")
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise InputError(f"{path}: not a valid JSON Schema ({exc.message})") from None
    return schema
