"""Read-only sequences whose items are made from a position when read.

``Positional`` gives a ``Sequence`` its indexing: a subclass has ``__len__`` and ``_at``
(the item at a position from 0 to len - 1); an index may be negative, as a list's; a slice
is the tuple of its items (``_slice``, which a subclass may read another way).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar, overload

T = TypeVar("T")


class Positional(Sequence[T]):
    """A read-only sequence whose items are made from a position when read (``_at``)."""

    __slots__ = ()

    def _at(self, position: int) -> T:
        raise NotImplementedError

    def _slice(self, index: slice) -> Sequence[T]:
        return tuple(self._at(i) for i in range(*index.indices(len(self))))

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[T]: ...
    def __getitem__(self, index: int | slice) -> T | Sequence[T]:
        if isinstance(index, slice):
            return self._slice(index)
        position = index + len(self) if index < 0 else index
        if not 0 <= position < len(self):
            raise IndexError(index)
        return self._at(position)
