"""What one worker learns from a gateway, kept in the process and shared with every other
worker of the deployment through one Redis hash (swarm.store.shared_hash).

``SharedLearning`` is what the shared kinds have in common: context windows and token
scales (swarm.calls.context_window.SharedWindows) and local servers' paces
(swarm.calls.local.pacing.SharedPacing). Each keeps its values in the process under its
``_lock``; ``_refresh`` takes in the hash's fields when a read is due (the hash throttles
reads per process), one field at a time through the kind's ``_apply``. Redis unreachable:
nothing is taken in and the process's own values serve.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import ClassVar

import redis

from swarm.store.shared_hash import SharedHash


class SharedLearning(ABC):
    """Mixin before an in-process kind (``class SharedX(SharedLearning, X)``): the hash at
    ``key``, and ``_refresh`` to take in what the other workers put there."""

    WHAT: ClassVar[str]
    """What the hash holds, for log lines."""
    _lock: threading.Lock

    def __init__(
        self, client: redis.Redis, key: str, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__()
        self.shared = SharedHash(client, key, self.WHAT, clock)

    def _refresh(self) -> None:
        """Take in the hash's fields when a read is due."""
        found = self.shared.read_due()
        if found is None:
            return
        with self._lock:
            for field, value in found.items():
                self._apply(field, value)

    @abstractmethod
    def _apply(self, field: str, value: str) -> None:
        """Take one field of the hash into the process's values (``_lock`` held)."""
