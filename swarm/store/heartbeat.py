"""One heartbeat thread per worker process renews every lease the process holds.

A lease (swarm.store.leases) lives ``lease_s``; the heartbeat renews all of them every
``lease_s / BEATS_PER_LEASE`` in two round trips, however many there are (one renewal
script per job, pipelined, then one index update). A lease the renewal finds lost (it
lapsed while the process was frozen or cut off from Redis, and another run took it) is
dropped and marked lost; the run holding it is fenced off by the store's scripts anyway.
A beat that fails (Redis unreachable) is logged at DEBUG and the next one tries again.
Each beat also runs the renewals registered with ``also`` (a worker's admission permits).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from swarm.store.base import JobStore
from swarm.store.leases import Lease

log = logging.getLogger(__name__)
BEATS_PER_LEASE = 3
"""Renewals per lease lifetime: two beats may fail (a Redis blip) before a lease lapses."""


class LeaseKeeper:
    """The leases of one process and the thread that renews them."""

    def __init__(self, store: JobStore, lease_s: float) -> None:
        self.store = store
        self.lease_s = lease_s
        self.beat_s = lease_s / BEATS_PER_LEASE
        self._held: dict[Lease, None] = {}
        self._lost: set[Lease] = set()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._also: list[Callable[[], object]] = []

    def hold(self, lease: Lease) -> None:
        """Renew ``lease`` from now on (starts the thread on first use)."""
        with self._lock:
            self._held[lease] = None
            self._start()

    def also(self, renew: Callable[[], object]) -> None:
        """Run ``renew`` at every beat too (starts the thread)."""
        with self._lock:
            self._also.append(renew)
            self._start()

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="swarm-heartbeat", daemon=True)
            self._thread.start()

    def drop(self, lease: Lease) -> None:
        """Stop renewing ``lease`` (its holder released it)."""
        with self._lock:
            self._held.pop(lease, None)
            self._lost.discard(lease)

    def lost(self, lease: Lease) -> bool:
        """True once a renewal found ``lease`` taken over or lapsed."""
        with self._lock:
            return lease in self._lost

    def held(self) -> list[Lease]:
        """The leases renewed now."""
        with self._lock:
            return list(self._held)

    def beat(self) -> set[Lease]:
        """Renew every held lease once; the ones found lost."""
        leases = self.held()
        if not leases:
            return set()
        lost = self.store.renew_leases(leases, self.lease_s)
        if lost:
            log.debug("swarm heartbeat: %d lease(s) lost: %s", len(lost), sorted(lost, key=str))
            with self._lock:
                for lease in lost & self._held.keys():
                    del self._held[lease]
                    self._lost.add(lease)
        return lost

    def stop(self) -> None:
        """End the thread (tests; a worker's daemon thread ends with the process)."""
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self.beat_s):
            for renew in [self.beat, *self._also]:
                try:
                    renew()
                except Exception as exc:  # Redis down: the next beat tries again
                    log.debug("swarm heartbeat: %s failed (%s); again in %.1f s",
                              getattr(renew, "__name__", renew), exc, self.beat_s)  # fmt: skip
