"""When a batch job polls and when it gives up on its batches: pure functions of time.

The live reserve is the end of a job's deadline kept for live calls: a batch still pending
when only the reserve is left is cancelled and its pending nodes run live, so the job
still ends by its deadline (plus, at worst, one live call). Polls come back often at first
(a fast batch ends the job soon after it does) and less often later, never after the
switch to live and never longer than POLL_MAX_S (a countdown message is held well inside
the broker's visibility timeout).
"""

from __future__ import annotations

from swarm.records import JobSpec

RESERVE_SHARE = 0.1
"""Share of the time from submission to the deadline kept for live calls ..."""
RESERVE_MIN_S = 2.0
RESERVE_MAX_S = 300.0
"""... at least RESERVE_MIN_S, at most RESERVE_MAX_S."""
POLL_MIN_S = 0.5
POLL_MAX_S = 30.0
POLL_SHARE = 0.1
"""A poll comes back after this share of the batch's age (within POLL_MIN_S..POLL_MAX_S)."""
TERMINAL = frozenset({"completed", "failed", "expired", "cancelled"})
"""Batch statuses after which the batch changes no more."""


def live_reserve_s(spec: JobSpec) -> float:
    """Seconds before the deadline at which pending batch lines go live."""
    if spec.deadline_at is None:
        return 0.0
    return reserve_for_s(spec.deadline_at - spec.submitted_at)


def reserve_for_s(deadline_s: float) -> float:
    """The live reserve of a deadline ``deadline_s`` after submission."""
    return min(max(max(deadline_s, 0.0) * RESERVE_SHARE, RESERVE_MIN_S), RESERVE_MAX_S)


def batches_within(deadline_s: float | None) -> bool:
    """True when a deadline leaves time for a batch before its live reserve."""
    return deadline_s is not None and deadline_s > reserve_for_s(deadline_s)


def switch_at(spec: JobSpec) -> float:
    """Unix time from which pending nodes run live (infinite without a deadline)."""
    if spec.deadline_at is None:
        return float("inf")
    return spec.deadline_at - live_reserve_s(spec)


def poll_countdown_s(now: float, created_at: float, switch: float) -> float:
    """Seconds until the next poll of a batch created at ``created_at``."""
    wait = min(max((now - created_at) * POLL_SHARE, POLL_MIN_S), POLL_MAX_S)
    return max(min(wait, switch - now), 0.1)
