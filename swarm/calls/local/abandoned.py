"""Permits of abandoned requests: held while the gateway computes them, not through a hang.

A request the node stopped waiting for at its deadline goes on in overtime
(swarm.calls.local.overtime) and keeps its admission permits until it ends (swarm.calls.admission
.gate): a slot-bound server such as llama.cpp is still computing it, and a request sent
meanwhile would only queue behind it. A request that hangs (a connection the gateway never
answers) would hold its permits for the whole overtime grace, and a few of them would keep a
small in-flight limit shut: all its permits held, nothing admitted, nothing answered. So a
held permit goes back early, one at a time, on evidence that its request is not work the
gateway does before new work:

- overtaken: a request to the same backend, sent after the held one was abandoned, was
  answered. A server working through a queue in order never answers a newer request before
  an older one, so the older one hangs or is far slower than the rest. One held permit goes
  back per such answer, so a server that does not serve in order is sent at most one more
  request per answer it gives, never a burst;
- starved: a call is refused for in-flight permits while this process holds abandoned
  permits of its backend and the backend has ended none of this process's requests for
  ``patience_s`` (a node timeout), counted from the oldest one's abandonment at the
  earliest: nothing it computes will free a permit soon. The oldest held permit goes back;
  another only after a further ``patience_s`` without progress.

The request itself is still read (and a late answer billed) until it ends or its grace is
over; only its permits go back. Per process: a worker sees the answers and ends of its own
requests, which is the evidence it can act on without a round trip.

Hand-written: bookkeeping of our own permits, which no library models.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from swarm.calls.request import Answer
from swarm.settings import Settings
from swarm.settings_slice import default_of

log = logging.getLogger(__name__)


class Release(StrEnum):
    """Why a held permit went back."""

    ENDED = "ended"
    """Its request ended (answered late, or failed)."""
    OVERTAKEN = "overtaken"
    """A request sent after it was abandoned was answered first."""
    STARVED = "starved"
    """Calls waited for permits while the backend ended nothing for ``patience_s``."""


Settle = Callable[[Answer | BaseException | Release], None]
"""Finishes a held permit: with how its request ended, or why it goes back early."""


@dataclass(eq=False)
class Held:
    """One abandoned request's permits, held until its request ends or they go back early."""

    backend: str
    abandoned_at: float
    settle: Settle
    owner: AbandonedPermits
    released: Release | None = None
    """Set once, under the owner's lock: the permits were given back."""

    def end(self, outcome: Answer | BaseException) -> None:
        """The request ended (``StillReading.when_ended``): its permits go back now unless
        they already have; either way the backend made progress."""
        if self.owner.take(self, Release.ENDED):
            self.settle(outcome)


@dataclass
class AbandonedPermits:
    """Per process: the held permits of abandoned requests, by backend, oldest first."""

    patience_s: float = default_of("node_timeout_s")
    clock: Callable[[], float] = time.monotonic
    _held: dict[str, list[Held]] = field(default_factory=dict)
    _progress: dict[str, float] = field(default_factory=dict)
    """When each backend last ended a request of this process (or a permit last went back
    as starved, so the next one waits a further ``patience_s``)."""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def from_settings(cls, settings: Settings) -> AbandonedPermits:
        """Patience of one node timeout (SWARM_NODE_TIMEOUT_S)."""
        return cls(settings.node_timeout_s)

    def hold(self, backend: str, settle: Settle) -> Held:
        """Hold a request's permits from now (its node's deadline); ``settle`` finishes them."""
        now = self.clock()
        held = Held(backend, now, settle, self)
        with self._lock:
            self._held.setdefault(backend, []).append(held)
            self._progress.setdefault(backend, now)
        return held

    def ended(self, backend: str) -> None:
        """A request to ``backend`` ended (answered or failed): the backend is computing."""
        with self._lock:
            self._progress[backend] = self.clock()

    def answered(self, backend: str, sent_at: float) -> None:
        """A request to ``backend`` sent at ``sent_at`` (this clock) was answered: the oldest
        permit held by a request abandoned before then goes back (overtaken)."""
        with self._lock:
            self._progress[backend] = self.clock()
            held = self._held.get(backend)
            oldest = held[0] if held and held[0].abandoned_at < sent_at else None
            if oldest is not None:
                self._release(oldest, Release.OVERTAKEN)
        if oldest is not None:
            self._give_back(oldest)

    def starved(self, backend: str) -> bool:
        """A call to ``backend`` was refused for in-flight permits: True when the oldest
        permit held here went back (the backend ended nothing for ``patience_s``, nor since
        that request was abandoned)."""
        now = self.clock()
        with self._lock:
            held = self._held.get(backend)
            if not held:
                return False
            oldest = held[0]
            since = max(self._progress.get(backend, now), oldest.abandoned_at)
            if now - since < self.patience_s:
                return False
            self._release(oldest, Release.STARVED)
            self._progress[backend] = now
        self._give_back(oldest)
        return True

    def holding(self, backend: str) -> int:
        """Permits held here for abandoned requests to ``backend``."""
        with self._lock:
            return len(self._held.get(backend, ()))

    def take(self, held: Held, why: Release) -> bool:
        """Mark ``held`` released for ``why``; False when it already was. An end counts as
        the backend's progress either way."""
        with self._lock:
            if why is Release.ENDED:
                self._progress[held.backend] = self.clock()
            if held.released is not None:
                return False
            self._release(held, why)
            return True

    def _release(self, held: Held, why: Release) -> None:
        """Under the lock: ``held`` leaves its backend's list."""
        held.released = why
        backend = self._held[held.backend]
        backend.remove(held)
        if not backend:
            del self._held[held.backend]

    def _give_back(self, held: Held) -> None:
        age_s = self.clock() - held.abandoned_at
        log.debug("admission: permits of a request to %s abandoned %.1f s ago go back (%s); "
                  "its answer is still read", held.backend, age_s, held.released)  # fmt: skip
        assert held.released is not None
        held.settle(held.released)
