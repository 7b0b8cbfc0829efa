"""Inputs read once and kept on disk: one input per non-empty line of a stream.

`swarm run -` copies stdin to a temporary file as it reads it (counting its inputs), and
the submit reads the file back a chunk at a time: the producer never holds every input at
once, whatever the job's size. ``StreamedInputs`` is the sequence the client takes for
that: its length is known, its items are made as they are iterated.
"""

from __future__ import annotations

import itertools
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from typing import IO

from swarm.errors import InputError
from swarm.positional import Positional
from swarm.records import InputItem
from swarm.sources.text import decode_text

CRLF = "\r\n"
"""Line ends stripped from each line (stdin is read as bytes: no newline translation)."""


class SpooledLines:
    """The non-empty lines of ``stream`` in a temporary file (deleted when closed), each
    with its line number: InputItems ``stdin:<line>``. Each line is held to the rule of a
    file's text (swarm.sources.text: no NUL byte, UTF-8): InputError names the line and
    the byte. A stream of bytes (``sys.stdin.buffer``) is decoded here; the lines of a
    text stream are checked as the bytes they came from (a surrogate escape stands for
    a byte that was not UTF-8)."""

    def __init__(self, stream: Iterable[str | bytes]) -> None:
        # Open as long as the inputs are (close(); the file has no name on disk).
        self._file: IO[str] = tempfile.TemporaryFile(  # noqa: SIM115
            "w+", encoding="utf-8", newline="\n"
        )
        self.count = 0
        offset = 0
        try:
            for number, raw in enumerate(stream, start=1):
                data = raw if isinstance(raw, bytes) else _bytes_of(raw)
                line = decode_text(data, f"stdin:{number}", noun="input", offset=offset)
                offset += len(data)
                if line.strip():
                    self._file.write(f"{number}\t{line.rstrip(CRLF)}\n")
                    self.count += 1
        except InputError:
            self._file.close()
            raise
        self._file.flush()

    def __iter__(self) -> Iterator[InputItem]:
        self._file.seek(0)
        for raw in self._file:
            number, _, text = raw.rstrip("\n").partition("\t")
            yield InputItem(ref=f"stdin:{number}", text=text)

    def close(self) -> None:
        self._file.close()


class StreamedInputs(Positional[InputItem]):
    """Inputs in order from segments: lists of items (files) and spooled lines (stdin);
    iterating reads the spools again each time (index access walks to the item, a slice
    reads them all once)."""

    def __init__(self, segments: Sequence[Sequence[InputItem] | SpooledLines]) -> None:
        self._segments = list(segments)
        self._length = sum(_count(segment) for segment in self._segments)

    def __len__(self) -> int:
        return self._length

    def __iter__(self) -> Iterator[InputItem]:
        for segment in self._segments:
            yield from segment

    def _at(self, position: int) -> InputItem:
        return next(itertools.islice(self, position, None))

    def _slice(self, index: slice) -> Sequence[InputItem]:
        return list(self)[index]  # one pass over the spools, not one per item

    def close(self) -> None:
        """Delete the spooled files."""
        for segment in self._segments:
            if isinstance(segment, SpooledLines):
                segment.close()


def _bytes_of(line: str) -> bytes:
    """The bytes a decoded line came from: a surrogate escape is the byte it stands for;
    any other lone surrogate stays one (its bytes are not UTF-8, and are refused)."""
    try:
        return line.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return line.encode("utf-8", "surrogatepass")


def _count(segment: Sequence[InputItem] | SpooledLines) -> int:
    return segment.count if isinstance(segment, SpooledLines) else len(segment)
