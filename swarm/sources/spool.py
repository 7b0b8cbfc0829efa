"""Inputs read once and kept on disk: one input per non-empty line of a stream.

`swarm run -` copies stdin to a temporary file as it reads it (counting its inputs), and
the submit reads the file back a chunk at a time: the producer never holds every input at
once, whatever the job's size. ``StreamedInputs`` is the sequence the client takes for
that: its length is known, its items are made as they are iterated.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Iterator, Sequence
from typing import IO, overload

from swarm.records import InputItem


class SpooledLines:
    """The non-empty lines of ``stream`` in a temporary file (deleted when closed), each
    with its line number: InputItems ``stdin:<line>``."""

    def __init__(self, stream: Iterable[str], prefix: str = "stdin") -> None:
        self._prefix = prefix
        # Open as long as the inputs are (close(); the file has no name on disk).
        self._file: IO[str] = tempfile.TemporaryFile(  # noqa: SIM115
            "w+", encoding="utf-8", newline="\n"
        )
        self.count = 0
        for number, line in enumerate(stream, start=1):
            if line.strip():
                self._file.write(f"{number}\t{line.rstrip(chr(10))}\n")
                self.count += 1
        self._file.flush()

    def __iter__(self) -> Iterator[InputItem]:
        self._file.seek(0)
        for raw in self._file:
            number, _, text = raw.rstrip("\n").partition("\t")
            yield InputItem(ref=f"{self._prefix}:{number}", text=text)

    def close(self) -> None:
        self._file.close()


class StreamedInputs(Sequence[InputItem]):
    """Inputs in order from segments: lists of items (files) and spooled lines (stdin);
    iterating reads the spools again each time (index access walks to the item)."""

    def __init__(self, segments: Sequence[Sequence[InputItem] | SpooledLines]) -> None:
        self._segments = list(segments)
        self._length = sum(_count(segment) for segment in self._segments)

    def __len__(self) -> int:
        return self._length

    def __iter__(self) -> Iterator[InputItem]:
        for segment in self._segments:
            yield from segment

    @overload
    def __getitem__(self, index: int) -> InputItem: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[InputItem]: ...
    def __getitem__(self, index: int | slice) -> InputItem | Sequence[InputItem]:
        if isinstance(index, slice):
            return list(self)[index]
        position = index + self._length if index < 0 else index
        if not 0 <= position < self._length:
            raise IndexError(index)
        for i, item in enumerate(self):
            if i == position:
                return item
        raise IndexError(index)  # pragma: no cover - the length counts every item

    def close(self) -> None:
        """Delete the spooled files."""
        for segment in self._segments:
            if isinstance(segment, SpooledLines):
                segment.close()


def _count(segment: Sequence[InputItem] | SpooledLines) -> int:
    return segment.count if isinstance(segment, SpooledLines) else len(segment)
