"""Misbehaviour on purpose: latency, random faults and per-request markers.

Markers are written into the LAST user message and force one outcome for that request:

    [[sim:status=NNN]]    answer HTTP NNN (400..599) with an OpenAI-style error body
    [[sim:hang]]          never answer; the request ends when the client disconnects
    [[sim:bad_json]]      200 with a text/html body that is not JSON
    [[sim:drop]]          close the TCP connection without answering
    [[sim:latency_ms=N]]  take exactly N ms (no load slowdown)
    [[sim:straggle_ms=N]] the first request with this exact body takes N ms; repeats of it
                          (a retry, a hedge) take the usual latency (a straggler)
    [[sim:empty_choices]] 200 with ``choices: []`` (usage still present)
    [[sim:no_usage]]      200 without ``usage``
    [[sim:reply_b64=B]]   answer with the base64 (URL-safe) text B as content (swarm.sim.content)
    [[sim:answer_tokens=N]] the answer is N completion tokens long (cut at the request's
                          max_tokens, then ``finish_reason: "length"``); without it the
                          length is 40..240 tokens, fixed by the request's digest

Precedence when several are present: status, drop, hang, bad_json; ``empty_choices``,
``no_usage``, ``latency_ms`` and ``answer_tokens`` combine with anything. Markers override
random faults.

Latency: fixed (``latency_ms``), lognormal (``latency_p50_ms``/``latency_p99_ms``) or, in
generation mode (``ttft_ms``/``tokens_per_s``), a time to first token plus the answer's
completion tokens at a steady rate; all of them times the load slowdown above the knees.
With ``fast_errors`` (on in generation mode) a 5xx comes back at once.
"""

from __future__ import annotations

import dataclasses
import math
import random
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from swarm.sim.config import SimConfig

MARKER_RE = re.compile(r"\[\[sim:([a-z_]+)(?:=(\d+))?\]\]")
SERVER_ERROR_STATUSES = (500, 502, 503)
Z_99 = 2.326
"""Standard normal quantile of 0.99."""


class Fault(StrEnum):
    """How an admitted request ends (besides a normal answer)."""

    NONE = "none"
    STATUS = "status"
    RATE_LIMIT = "rate_limit"
    HANG = "hang"
    BAD_JSON = "bad_json"
    DROP = "drop"


@dataclass(frozen=True)
class Markers:
    """The ``[[sim:...]]`` markers found in one message."""

    status: int | None = None
    hang: bool = False
    bad_json: bool = False
    drop: bool = False
    latency_ms: int | None = None
    straggle_ms: int | None = None
    empty_choices: bool = False
    no_usage: bool = False
    answer_tokens: int | None = None


_FLAGS = frozenset({"hang", "bad_json", "drop", "empty_choices", "no_usage"})
_NUMBERS = {
    "status": (400, 599),
    "latency_ms": (0, math.inf),
    "straggle_ms": (0, math.inf),
    "answer_tokens": (1, math.inf),
}
"""The markers that take a number, and the range it must be in (else it is ignored)."""


def parse_markers(text: str) -> Markers:
    """Markers in ``text``; unknown names and statuses outside 400..599 are ignored."""
    if "[[sim:" not in text:
        return Markers()
    found: dict[str, Any] = {}  # Markers' fields (a marker repeated: the last one wins)
    for name, value in MARKER_RE.findall(text):
        if name in _FLAGS and not value:
            found[name] = True
        elif name in _NUMBERS and value and _NUMBERS[name][0] <= int(value) <= _NUMBERS[name][1]:
            found[name] = int(value)
    return Markers(**found)


def marker_fault(markers: Markers) -> tuple[Fault, int | None]:
    """The fault the markers force (with its HTTP status), or ``Fault.NONE``."""
    if markers.status is not None:
        return Fault.STATUS, markers.status
    for fault, present in (
        (Fault.DROP, markers.drop),
        (Fault.HANG, markers.hang),
        (Fault.BAD_JSON, markers.bad_json),
    ):
        if present:
            return fault, None
    return Fault.NONE, None


class FaultInjector:
    """Draws random faults with the configured rates from a seeded generator.

    One uniform draw per request picks at most one fault, so each rate is exact.
    """

    def __init__(self, config: SimConfig) -> None:
        self._rng = random.Random(f"faults:{config.seed}")
        self._total = config.fault_rate_total()
        self._table = (
            (Fault.STATUS, config.error_rate),
            (Fault.RATE_LIMIT, config.rate_limit_rate),
            (Fault.HANG, config.hang_rate),
            (Fault.BAD_JSON, config.bad_json_rate),
            (Fault.DROP, config.drop_rate),
        )

    def draw(self) -> tuple[Fault, int | None]:
        """A fault (with a 5xx status for server errors), or ``Fault.NONE``."""
        if self._total <= 0.0:
            return Fault.NONE, None
        point = self._rng.random()
        for fault, rate in self._table:
            if point < rate:
                status = self._rng.choice(SERVER_ERROR_STATUSES) if fault is Fault.STATUS else None
                return fault, status
            point -= rate
        return Fault.NONE, None


class LatencyModel:
    """Fixed, lognormal or generation latency, slowed down above the load knee.

    In generation mode ``base_ms`` is the time to first token and ``per_token_ms`` the
    time of each completion token; otherwise ``per_token_ms`` is 0.
    """

    def __init__(self, config: SimConfig) -> None:
        self._rng = random.Random(f"latency:{config.seed}")
        self._fixed_ms = config.latency_ms
        if config.generation:
            self._fixed_ms = config.ttft_ms or 0.0
        self.per_token_ms = 1000.0 / config.tokens_per_s if config.tokens_per_s else 0.0
        self._mu: float | None = None
        self._sigma = 0.0
        if config.latency_p50_ms is not None and config.latency_p99_ms is not None:
            self._mu = math.log(config.latency_p50_ms)
            self._sigma = math.log(config.latency_p99_ms / config.latency_p50_ms) / Z_99
        self._knee = config.knee_rps
        self._knee_inflight = config.knee_inflight
        self._exponent = config.slowdown_exponent

    def base_ms(self) -> float:
        """One latency sample without load effects."""
        if self._mu is None:
            return self._fixed_ms
        return self._rng.lognormvariate(self._mu, self._sigma)

    def slowdown(self, rate_rps: float, inflight: int = 0) -> float:
        """Latency factor at ``rate_rps`` requests in the last second and ``inflight``
        requests being served (1 below both knees)."""
        factor = 1.0
        if self._knee is not None and rate_rps > self._knee:
            factor *= (rate_rps / self._knee) ** self._exponent
        if self._knee_inflight is not None and inflight > self._knee_inflight:
            factor *= (inflight / self._knee_inflight) ** self._exponent
        return float(factor)


@dataclass(frozen=True)
class Plan:
    """What happens to one request: its fault, status, latency and answer shape."""

    fault: Fault
    status: int | None
    latency_s: float
    """Time before the answer (in generation mode: before its first token)."""
    empty_choices: bool = False
    no_usage: bool = False
    per_token_s: float = 0.0
    """Generation mode: time of each completion token of the answer."""
    answer_tokens: int | None = None
    """The answer's length asked by ``[[sim:answer_tokens=N]]`` (None: the natural one)."""

    def answer_delay_s(self, completion_tokens: int) -> float:
        """How long an answer of ``completion_tokens`` takes to come back."""
        return self.latency_s + completion_tokens * self.per_token_s

    def exact(self, latency_s: float) -> Plan:
        """This plan taking exactly ``latency_s`` (whatever the answer's length)."""
        return dataclasses.replace(self, latency_s=latency_s, per_token_s=0.0)


def plan_request(
    markers: Markers,
    injector: FaultInjector,
    latency: LatencyModel,
    rate_rps: float,
    inflight: int = 0,
) -> Plan:
    """Decide the outcome of a request: markers first, then random faults."""
    fault, status = marker_fault(markers)
    if fault is Fault.NONE:
        fault, status = injector.draw()
    if markers.latency_ms is not None:
        latency_ms, per_token_ms = float(markers.latency_ms), 0.0
    else:
        slowdown = latency.slowdown(rate_rps, inflight)
        latency_ms = latency.base_ms() * slowdown
        per_token_ms = latency.per_token_ms * slowdown
    return Plan(
        fault=fault,
        status=status,
        latency_s=latency_ms / 1000.0,
        empty_choices=markers.empty_choices,
        no_usage=markers.no_usage,
        per_token_s=per_token_ms / 1000.0,
        answer_tokens=markers.answer_tokens,
    )
