"""Node ids and input refs of a job, stored as ranges instead of one string per node.

A job of 100,000 inputs has 100,000 node ids (``n00000`` ... ``n99999``) and as many input
refs (``stdin:1`` ... ``stdin:100000``). Held as tuples of strings they cost the producer,
and every worker that parses the spec, a string object per node, and the spec's JSON two
quoted strings per node (ops/bench/results/scale.md, "Node ids and refs"). Both follow a
pattern: the ids are a prefix and a zero-padded position, the refs of streamed lines a
prefix and a line number that mostly grows by one. ``NodeIds`` and ``RefRuns`` are the
read-only sequences made of those patterns: an item is made when it is read.

In a JobSpec's JSON, ``NodeIds`` is ``{"prefix": "n", "width": 5, "count": 100000}`` and
``RefRuns`` ``{"runs": [["stdin", 1, 100000]]}``; a plain list of strings (any ids, any
refs, and every spec stored before these existed) reads back as a tuple.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from swarm.positional import Positional


class _Generated(Positional[str]):
    """Ids or refs made from a position when read (swarm.positional), hashed as a tuple."""

    __slots__ = ()

    def __hash__(self) -> int:
        return hash(tuple(self))


class NodeIds(_Generated):
    """``count`` ids ``<prefix><position, zero-padded to width>`` in position order."""

    __slots__ = ("prefix", "size", "width")

    def __init__(self, prefix: str, width: int, count: int) -> None:
        self.prefix = prefix
        self.width = width
        self.size = count

    @classmethod
    def for_count(cls, count: int, prefix: str = "n") -> NodeIds:
        """The ids of ``count`` nodes, at least four digits wide (``n0000``)."""
        return cls(prefix, max(4, len(str(count - 1))), count)

    def __len__(self) -> int:
        return self.size

    def __iter__(self) -> Iterator[str]:
        return (self._at(i) for i in range(self.size))

    def __contains__(self, node_id: object) -> bool:
        return isinstance(node_id, str) and self.position(node_id) is not None

    def index(self, value: Any, start: int = 0, stop: int | None = None) -> int:
        position = self.position(value) if isinstance(value, str) else None
        end = self.size if stop is None else stop
        if position is None or not start <= position < end:
            raise ValueError(f"{value!r} is not a node id of this job")
        return position

    def position(self, node_id: str) -> int | None:
        """The position of ``node_id``, None when it is not one of these ids."""
        digits = node_id[len(self.prefix) :]
        if not node_id.startswith(self.prefix) or len(digits) != self.width:
            return None
        if not digits.isdigit() or not digits.isascii():
            return None
        position = int(digits)
        return position if position < self.size else None

    def _at(self, position: int) -> str:
        return f"{self.prefix}{position:0{self.width}d}"

    def as_json(self) -> dict[str, Any]:
        return {"prefix": self.prefix, "width": self.width, "count": self.size}

    def __eq__(self, other: object) -> bool:
        if isinstance(other, NodeIds):
            return self.as_json() == other.as_json()
        return _same_items(self, other)

    __hash__ = _Generated.__hash__

    def __repr__(self) -> str:
        return f"NodeIds({self.prefix!r}, {self.width}, {self.size})"


class RefRuns(_Generated):
    """Refs ``<prefix>:<number>`` as runs (prefix, first number, length) of numbers that
    grow by one; ``RefRuns.collect`` makes one from refs as they come."""

    __slots__ = ("_ends", "runs")

    def __init__(self, runs: Iterable[tuple[str, int, int]]) -> None:
        self.runs = tuple((str(p), int(first), int(length)) for p, first, length in runs)
        ends, total = [], 0
        for _, _, length in self.runs:
            total += length
            ends.append(total)
        self._ends = tuple(ends)

    def __len__(self) -> int:
        return self._ends[-1] if self._ends else 0

    def _at(self, position: int) -> str:
        run = bisect.bisect_right(self._ends, position)
        prefix, first, length = self.runs[run]
        offset = position - (self._ends[run] - length)
        return f"{prefix}:{first + offset}"

    def __iter__(self) -> Iterator[str]:
        for prefix, first, length in self.runs:
            for number in range(first, first + length):
                yield f"{prefix}:{number}"

    def as_json(self) -> dict[str, Any]:
        return {"runs": [list(run) for run in self.runs]}

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RefRuns):
            return self.runs == other.runs
        return _same_items(self, other)

    __hash__ = _Generated.__hash__

    def __repr__(self) -> str:
        return f"RefRuns({len(self.runs)} runs, {len(self)} refs)"


class RefCollector:
    """Collects refs one at a time, as runs while each is ``<prefix>:<next number>``;
    ``result()`` is a RefRuns, or a tuple once a ref broke the pattern (kept whole)."""

    MAX_RUNS = 1024
    """More runs than this and the refs are kept as a tuple (runs no longer save much)."""

    def __init__(self) -> None:
        self._runs: list[list[Any]] = []
        self._plain: list[str] | None = None

    def add(self, ref: str) -> None:
        if self._plain is not None:
            self._plain.append(ref)
            return
        prefix, sep, number = ref.rpartition(":")
        if sep and number.isdigit() and number.isascii() and str(int(number)) == number:
            last = self._runs[-1] if self._runs else None
            if last is not None and last[0] == prefix and last[1] + last[2] == int(number):
                last[2] += 1
                return
            if len(self._runs) < self.MAX_RUNS:
                self._runs.append([prefix, int(number), 1])
                return
        self._plain = [*RefRuns(tuple(run) for run in self._runs), ref]

    def result(self) -> Sequence[str]:
        if self._plain is not None:
            return tuple(self._plain)
        return RefRuns(tuple(run) for run in self._runs)


def parse_ids(value: Any) -> Sequence[str]:
    """A JobSpec's ``node_ids`` from JSON (or Python): NodeIds from its object form, else a
    tuple of strings."""
    if isinstance(value, NodeIds):
        return value
    if isinstance(value, dict):
        return NodeIds(str(value["prefix"]), int(value["width"]), int(value["count"]))
    return _strings(value)


def parse_refs(value: Any) -> Sequence[str]:
    """A JobSpec's ``input_refs`` from JSON (or Python): RefRuns from its object form,
    else a tuple of strings."""
    if isinstance(value, RefRuns):
        return value
    if isinstance(value, dict):
        return RefRuns(tuple(run) for run in value["runs"])
    return _strings(value)


def dump(value: Sequence[str]) -> Any:
    """The JSON form of ``node_ids`` or ``input_refs``: an object for a range, else a list."""
    if isinstance(value, NodeIds | RefRuns):
        return value.as_json()
    return list(value)


def _strings(value: Any) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise ValueError("expected a list of strings")
    items = tuple(value)
    if not all(isinstance(item, str) for item in items):
        raise ValueError("expected a list of strings")
    return items


def _same_items(mine: Sequence[str], other: object) -> bool:
    if not isinstance(other, Sequence) or isinstance(other, str) or len(other) != len(mine):
        return False
    return all(a == b for a, b in zip(mine, other, strict=True))
