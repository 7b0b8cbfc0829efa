"""The simulator's prompt cache, as hosted providers cache (``SimConfig.prompt_cache``).

Per model, a prompt prefix (a run of whole leading messages of at least ``min_tokens``
estimated tokens) becomes cached when the first request carrying it has been answered,
and only requests that ARRIVE after that moment are served from it: requests sent at the
same moment all miss, as users of fan-out tools see on real gateways. An entry lives
``ttl_s`` after its last use (write or hit). A request's cached tokens are those of its
longest prefix cached at its arrival; they are part of its ``prompt_tokens`` and reported
in the usage (``prompt_tokens_details.cached_tokens``; swarm.sim.usage renders each
provider's format).

The older swarm.sim.content.PrefixCache (on when this one is off) counts a prefix as
cached as soon as any earlier request was answered, whatever its arrival.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from swarm.sim.content import ChatRequest, prefixes


@dataclass(frozen=True)
class Arrival:
    """A request as the cache saw it arrive: its cacheable prefixes and the moment."""

    at: float
    prefixes: tuple[tuple[bytes, int], ...]
    """(key, tokens) of each leading run of messages long enough to cache, shortest first."""


@dataclass(eq=False)
class PromptCache:
    """Cached prefixes per model: key -> (cached since, expires at)."""

    min_tokens: int
    ttl_s: float
    max_entries: int = 100_000
    clock: Callable[[], float] = time.monotonic
    _entries: OrderedDict[bytes, tuple[float, float]] = field(
        init=False, default_factory=OrderedDict
    )

    def arrive(self, request: ChatRequest) -> Arrival:
        """Note a request's arrival (call it when the request is admitted)."""
        return Arrival(self.clock(), tuple(prefixes(request, self.min_tokens)))

    def answered(self, arrival: Arrival) -> int:
        """The request's cached tokens, once answered; its prefixes are cached from now on
        for later arrivals (the hits' entries live ``ttl_s`` longer)."""
        now = self.clock()
        cached = 0
        for key, tokens in arrival.prefixes:
            entry = self._entries.get(key)
            if entry is not None and entry[1] <= now:
                del self._entries[key]
                entry = None
            if entry is not None and entry[0] <= arrival.at:
                cached = tokens
            since = entry[0] if entry is not None else now
            self._entries[key] = (since, now + self.ttl_s)
            self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)
        return cached
