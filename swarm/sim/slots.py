"""Concurrent requests per call slot: a check that no two calls for one node overlap.

The simulator cannot see a client's job or node, but every run of one call slot sends the
same request (model and messages), and two different nodes never do (each carries its own
input). So identical requests in service at the same time are two runs calling for one
slot at once: what the clients' call claims (leases) must prevent. A hedged call sends its
duplicate on purpose, so hedging shows here too.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable
from dataclasses import dataclass, field


@dataclass
class SlotTracker:
    """Identical requests in service; GET /stats ``slots``."""

    serving: Counter[Hashable] = field(default_factory=Counter)
    overlaps: int = 0
    """Requests admitted while an identical request was being served."""
    max_concurrent: int = 0
    """Most identical requests in service at once (1 when no slot ever overlapped)."""

    def enter(self, key: Hashable) -> None:
        """An admitted request starts being served."""
        self.serving[key] += 1
        now = self.serving[key]
        if now > 1:
            self.overlaps += 1
        self.max_concurrent = max(self.max_concurrent, now)

    def leave(self, key: Hashable) -> None:
        """The request was answered, failed, or its client went away."""
        self.serving[key] -= 1
        if self.serving[key] <= 0:
            del self.serving[key]

    def reset(self) -> None:
        """Zero the counters; requests in service stay tracked."""
        self.overlaps = 0
        self.max_concurrent = max(self.serving.values(), default=0)

    def snapshot(self) -> dict[str, int]:
        return {"overlaps": self.overlaps, "max_concurrent": self.max_concurrent}
