"""How far a submit has got: the nodes read for sending, recorded every chunk.

A 100,000-node job takes a while to send; ``swarm status`` shows "submitting N of M" from
the count this records in the job store (``JobStore.note_sent``) every
SWARM_SUBMIT_CHUNK_NODES nodes and clears once the whole header is sent. A submit that
stopped half way (the broker went away) leaves its last count: the job is then
``interrupted``, and ``swarm resume`` sends every node that has not succeeded.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from typing import TypeVar

from swarm.store import JobStore

log = logging.getLogger(__name__)
T = TypeVar("T")


class SentNodes:
    """Counts the nodes a fan-out reads and writes the count every ``every`` nodes."""

    def __init__(self, store: JobStore, job_id: str, every: int) -> None:
        self._store = store
        self._job_id = job_id
        self._every = every
        self._read = 0
        self._written = 0

    def start(self) -> None:
        """Before the first message: record 0 sent (a submit that stops before its first
        chunk is recorded is still seen as stopped)."""
        self._store.note_sent(self._job_id, 0)

    def reading(self, nodes: Iterable[T]) -> Iterator[T]:
        """``nodes``, counted as they are read."""
        for node in nodes:
            self._read += 1
            yield node

    def sent(self, _messages: int) -> None:
        """After a message went out: record the count once a chunk more was read."""
        if self._read - self._written >= self._every:
            self._written = self._read
            log.debug("swarm submit %s: %d nodes sent", self._job_id, self._read)
            self._store.note_sent(self._job_id, self._read)

    def done(self) -> None:
        """Every node went out: clear the count."""
        self._store.note_sent(self._job_id, None)
