"""Hedged calls: a duplicate request for a call that runs past the hedge delay, the first
answer wins and the other request is cancelled (off by default; see README "Hedged calls").

    policy  when to hedge and how many hedges a job may send (pure)
    sketch  recent latencies per model, shared through Redis (the adaptive delay)
    race    the hedged attempt on the process's event loop thread
"""

from swarm.calls.hedging.policy import HedgePolicy
from swarm.calls.hedging.race import HedgedCall, Hedger
from swarm.calls.hedging.sketch import LatencySketch

__all__ = ["HedgePolicy", "HedgedCall", "Hedger", "LatencySketch"]
