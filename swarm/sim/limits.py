"""Per-model rate limits: sliding request and token windows plus a concurrency gate.

All methods take the current time ``now`` (seconds, monotonic) so the math can be tested
without sleeping. A window of ``window_s`` seconds holds the events with
``now - window_s < t <= now``; an event at ``t`` frees its slot at ``t + window_s``.
Bookkeeping is amortised O(1): expired events are popped from the left of a deque.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import deque
from dataclasses import dataclass

from swarm.sim.config import ModelLimits

MINUTE_S = 60.0
SECOND_S = 1.0
MIN_RETRY_S = 0.01
"""Smallest Retry-After we send, so clients never spin on 0."""
CONCURRENCY_FALLBACK_RETRY_S = 1.0
"""Retry-After for a full concurrency gate whose requests have no known end (hangs)."""
UNLIMITED = 1_000_000_000
"""Value of the x-ratelimit-limit/remaining headers for a limit that is not set."""


def format_seconds(seconds: float) -> str:
    """Seconds as a short decimal string: 0.35 -> "0.35", 2.0 -> "2"."""
    text = f"{max(seconds, 0.0):.3f}".rstrip("0").rstrip(".")
    return text or "0"


class PeakCounter:
    """Events in a sliding window, and the most ever seen in one window."""

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self.peak = 0
        self._times: deque[float] = deque()

    def prune(self, now: float) -> None:
        """Forget events that left the window."""
        horizon = now - self.window_s
        while self._times and self._times[0] <= horizon:
            self._times.popleft()

    def count(self, now: float) -> int:
        """Events inside the window ending at ``now``."""
        self.prune(now)
        return len(self._times)

    def add(self, now: float) -> None:
        """Record one event at ``now`` and update the peak."""
        self.prune(now)
        self._times.append(now)
        self.peak = max(self.peak, len(self._times))

    def nth_expiry(self, index: int) -> float:
        """Time at which the ``index``-th oldest event (0-based) leaves the window."""
        return self._times[index] + self.window_s

    def reset_at(self, now: float) -> float:
        """Time at which the window is empty again (``now`` if it already is)."""
        self.prune(now)
        return self._times[-1] + self.window_s if self._times else now


class RequestWindow:
    """At most ``limit`` requests per sliding ``window_s``."""

    def __init__(self, limit: int, window_s: float, label: str) -> None:
        self.limit = limit
        self.label = label
        self._events = PeakCounter(window_s)

    def used(self, now: float) -> int:
        """Requests counted in the window."""
        return self._events.count(now)

    def wait(self, now: float, cost: int) -> float | None:
        """Seconds until one more request fits, or None if it fits now."""
        used = self._events.count(now)
        if used < self.limit:
            return None
        return self._events.nth_expiry(used - self.limit) - now

    def record(self, now: float, cost: int) -> None:
        """Count one admitted request."""
        self._events.add(now)

    def reset_in(self, now: float) -> float:
        """Seconds until the window is empty."""
        return self._events.reset_at(now) - now


class TokenWindow:
    """At most ``limit`` tokens charged per sliding ``window_s``."""

    def __init__(self, limit: int, window_s: float, label: str) -> None:
        self.limit = limit
        self.label = label
        self.window_s = window_s
        self._charges: deque[tuple[float, int]] = deque()
        self._total = 0

    def used(self, now: float) -> int:
        """Tokens charged in the window."""
        horizon = now - self.window_s
        while self._charges and self._charges[0][0] <= horizon:
            self._total -= self._charges.popleft()[1]
        return self._total

    def wait(self, now: float, cost: int) -> float | None:
        """Seconds until ``cost`` more tokens fit, or None if they fit now.

        A request larger than the whole limit never fits; it gets the full window.
        """
        need = self.used(now) + cost - self.limit
        if need <= 0:
            return None
        if cost > self.limit:
            return self.window_s
        freed = 0
        for when, tokens in self._charges:
            freed += tokens
            if freed >= need:
                return when + self.window_s - now
        return self.window_s  # unreachable: everything expiring frees enough

    def record(self, now: float, cost: int) -> None:
        """Charge ``cost`` tokens at ``now``."""
        self.used(now)
        self._charges.append((now, cost))
        self._total += cost

    def reset_in(self, now: float) -> float:
        """Seconds until nothing is charged any more."""
        self.used(now)
        return self._charges[-1][0] + self.window_s - now if self._charges else 0.0


class ConcurrencyGate:
    """Counts requests in flight; knows when the earliest of them should finish."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.inflight = 0
        self._ids = itertools.count(1)
        self._deadlines: list[tuple[float, int]] = []
        self._released: set[int] = set()

    def full(self) -> bool:
        """True when one more request would exceed the limit."""
        return self.limit is not None and self.inflight >= self.limit

    def acquire(self, deadline: float) -> int:
        """Take a slot for a request expected to finish at ``deadline``; returns a ticket."""
        ticket = next(self._ids)
        self.inflight += 1
        if self.limit is not None:
            heapq.heappush(self._deadlines, (deadline, ticket))
        return ticket

    def release(self, ticket: int) -> None:
        """Give the slot of ``ticket`` back."""
        self.inflight -= 1
        if self.limit is not None:
            self._released.add(ticket)
            self._drop_released()

    def _drop_released(self) -> None:
        heap = self._deadlines
        while heap and heap[0][1] in self._released:
            self._released.discard(heapq.heappop(heap)[1])

    def wait(self, now: float) -> float:
        """Seconds until the earliest in-flight request is expected to finish."""
        self._drop_released()
        heap = self._deadlines
        if not heap or math.isinf(heap[0][0]):
            return CONCURRENCY_FALLBACK_RETRY_S
        return heap[0][0] - now


@dataclass(frozen=True)
class Admitted:
    """The request may proceed; give ``ticket`` back with ``ModelLimiter.release``."""

    ticket: int


@dataclass(frozen=True)
class Rejected:
    """The request is over a limit: answer 429 with ``Retry-After: retry_after_s``."""

    label: str
    retry_after_s: float
    message: str


Window = RequestWindow | TokenWindow


class ModelLimiter:
    """All limits of one model. Not thread-safe: use from the event loop only."""

    def __init__(self, model: str, limits: ModelLimits) -> None:
        self.model = model
        self.limits = limits
        self.rpm = _request_window(limits.rpm, MINUTE_S, "requests per min (RPM)")
        self.rps = _request_window(limits.rps, SECOND_S, "requests per second (RPS)")
        self.tpm = TokenWindow(limits.tpm, MINUTE_S, "tokens per min (TPM)") if limits.tpm else None
        self.gate = ConcurrencyGate(limits.max_concurrent)

    def _windows(self) -> list[Window]:
        return [w for w in (self.rpm, self.rps, self.tpm) if w is not None]

    def admit(self, now: float, cost: int, deadline: float) -> Admitted | Rejected:
        """Admit a request charging ``cost`` tokens, expected to finish at ``deadline``."""
        waits = [(w.label, w.wait(now, cost), w.limit) for w in self._windows()]
        over = [(label, wait, limit) for label, wait, limit in waits if wait is not None]
        if self.gate.full() and self.gate.limit is not None:
            over.append(("concurrent requests", self.gate.wait(now), self.gate.limit))
        if over:
            retry = max(MIN_RETRY_S, *(wait for _, wait, _ in over))
            label, _, limit = over[0]
            message = (
                f"Rate limit reached for {self.model} on {label}: Limit {limit}, "
                f"Requested {cost if label.startswith('tokens') else 1}. "
                f"Please try again in {format_seconds(retry)}s."
            )
            return Rejected(label=label, retry_after_s=retry, message=message)
        for window in self._windows():
            window.record(now, cost)
        return Admitted(ticket=self.gate.acquire(deadline))

    def release(self, ticket: int) -> None:
        """The request of ``ticket`` is finished (answered, failed or abandoned)."""
        self.gate.release(ticket)

    def headers(self, now: float) -> dict[str, str]:
        """The x-ratelimit-* headers; unset limits report ``UNLIMITED`` and reset 0s."""
        requests = self.rpm or self.rps
        out: dict[str, str] = {}
        for kind, window in (("requests", requests), ("tokens", self.tpm)):
            limit, remaining, reset = UNLIMITED, UNLIMITED, 0.0
            if window is not None:
                limit = window.limit
                remaining = max(0, window.limit - window.used(now))
                reset = window.reset_in(now)
            out[f"x-ratelimit-limit-{kind}"] = str(limit)
            out[f"x-ratelimit-remaining-{kind}"] = str(remaining)
            out[f"x-ratelimit-reset-{kind}"] = f"{format_seconds(reset)}s"
        return out


def _request_window(limit: int | None, window_s: float, label: str) -> RequestWindow | None:
    return RequestWindow(limit, window_s, label) if limit else None
