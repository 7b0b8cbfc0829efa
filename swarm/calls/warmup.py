"""Prompt-cache warm-up: the first node of a fan-out calls alone, the others once it answered.

A gateway writes a prompt-cache entry when the first request carrying a prefix has been
answered; requests sent at the same moment all miss. So when a job's shared prefix (the
system message: role, instruction, shared context; swarm.jobs.prompts) is long enough for
its model to cache (the catalog's ``cache_min_prefix_tokens``) and worth a wait
(``SWARM_CACHE_WARMUP_MIN_TOKENS``, default 1,024), the first node to reach
its call leads: it calls alone while the others wait for its answer, at most
``cache_warmup_wait_s`` (default: one node timeout), then everyone calls at full speed
with the prefix cached. A model that does not cache (threshold 0), a prefix below the
threshold, a one-node job or ``SWARM_CACHE_WARMUP=false``: no one waits.

Which node leads is decided in the job store's Redis (SET NX), so the nodes of every
worker follow one leader; the embedded mode uses the in-process twin (MemoryWarmup).
The key is the model and the prefix's hash, so a second job with the same prefix on the
same model finds it warm and does not wait.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol

import redis

from swarm.catalog import ModelSpec
from swarm.cost.cache import warms
from swarm.settings import Settings
from swarm.tokens import estimate_tokens

log = logging.getLogger(__name__)

WARMING = "warming"
WARM = "warm"
WARM_TTL_S = 300.0
"""How long a prefix counts as warm after its leader answered: the shortest TTL providers
document for a cache entry (5 minutes; each hit refreshes theirs, so later nodes of a long
job still hit when they call)."""
POLL_S = 0.05
"""How often a waiting node reads the Redis key."""


class WarmupGate(Protocol):
    """Who leads a prefix's warm-up, and when the others may go."""

    def lead(self, key: str, hold_s: float) -> bool:
        """True when the caller is the first for ``key`` (it now leads for ``hold_s``)."""

    def done(self, key: str) -> None:
        """The leader's call ended: the others may call (the prefix is warm)."""

    def wait(self, key: str, timeout_s: float) -> bool:
        """Block until ``key`` is no longer warming; False when ``timeout_s`` ran out."""


@dataclass(frozen=True)
class WarmupPlan:
    """A node's part in its prefix's warm-up."""

    key: str
    model: str
    prefix_tokens: int
    wait_s: float


def warmup_floor(settings: Settings) -> int | None:
    """The shortest shared prefix the warm-up runs for (None: SWARM_CACHE_WARMUP=false)."""
    return settings.cache_warmup_min_tokens if settings.cache_warmup else None


def plan_warmup(
    settings: Settings, model: ModelSpec, messages: Sequence[dict[str, str]], nodes: int
) -> WarmupPlan | None:
    """The warm-up of a node's call, or None when no node needs to wait for it."""
    if not messages or messages[0].get("role") != "system":
        return None
    prefix = messages[0]["content"]
    tokens = estimate_tokens(prefix)
    floor = warmup_floor(settings)
    if not warms(model, tokens, nodes, floor):
        log.debug("warm-up: off for %s (shared prefix ~%d tokens, cache minimum %d, warm-up "
                  "from %s, %d nodes)", model.name, tokens, model.cache_min_prefix_tokens,
                  floor, nodes)  # fmt: skip
        return None
    digest = hashlib.sha256(f"{model.gateway_name}\0{prefix}".encode()).hexdigest()[:32]
    wait_s = settings.cache_warmup_wait_s or settings.node_timeout_s
    return WarmupPlan(f"swarm:warmup:{model.name}:{digest}", model.name, tokens, wait_s)


@contextmanager
def warm_turn(gate: WarmupGate, plan: WarmupPlan | None, node_id: str) -> Iterator[None]:
    """Run the block (the node's call) in its warm-up turn: at once as the leader (then
    open the gate), after the leader's answer (or the bounded wait) otherwise."""
    if plan is None:
        yield
        return
    if gate.lead(plan.key, plan.wait_s):
        log.info(
            "warm-up: node %s calls %s alone first (shared prefix ~%d tokens), the others "
            "once it has answered", node_id, plan.model, plan.prefix_tokens,
        )  # fmt: skip
        try:
            yield
        finally:
            gate.done(plan.key)
        return
    started = time.monotonic()
    answered = gate.wait(plan.key, plan.wait_s)
    log.debug("warm-up: node %s on %s went after %.3f s (%s)", node_id, plan.model,
              time.monotonic() - started,
              "prefix warm" if answered else "bounded wait ran out")  # fmt: skip
    yield


class MemoryWarmup:
    """The in-process gate (the embedded mode): one condition variable."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._cond = threading.Condition()
        self._keys: dict[str, tuple[str, float]] = {}

    def _state(self, key: str) -> str | None:
        held = self._keys.get(key)
        if held is None or held[1] <= self._clock():
            self._keys.pop(key, None)
            return None
        return held[0]

    def lead(self, key: str, hold_s: float) -> bool:
        with self._cond:
            if self._state(key) is not None:
                return False
            self._keys[key] = (WARMING, self._clock() + hold_s)
            return True

    def done(self, key: str) -> None:
        with self._cond:
            self._keys[key] = (WARM, self._clock() + WARM_TTL_S)
            self._cond.notify_all()

    def wait(self, key: str, timeout_s: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self._state(key) != WARMING, timeout_s)


class RedisWarmup:
    """The gate of a deployment: one key per prefix in the job store's Redis, under
    ``prefix`` (the gateway's, so deployments calling other gateways never share one)."""

    def __init__(self, client: redis.Redis, prefix: str = "") -> None:
        self._redis = client
        self._prefix = prefix

    def lead(self, key: str, hold_s: float) -> bool:
        key = self._prefix + key
        try:
            return bool(self._redis.set(key, WARMING, nx=True, px=max(int(hold_s * 1000), 1)))
        except redis.RedisError as exc:  # no gate: the node calls at once, as without warm-up
            log.warning("warm-up: Redis unavailable (%s); calling without waiting", exc)
            return True

    def done(self, key: str) -> None:
        key = self._prefix + key
        try:
            self._redis.set(key, WARM, px=int(WARM_TTL_S * 1000))
        except redis.RedisError as exc:
            log.warning("warm-up: cannot mark %s warm (%s); the others go after their wait",
                        key, exc)  # fmt: skip

    def wait(self, key: str, timeout_s: float) -> bool:
        key = self._prefix + key
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                state = self._redis.get(key)
            except redis.RedisError:
                return False
            if state not in (WARMING, WARMING.encode()):  # str or bytes, as the client decodes
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(POLL_S, left))
