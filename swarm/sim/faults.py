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

Precedence when several are present: status, drop, hang, bad_json; ``empty_choices``,
``no_usage`` and ``latency_ms`` combine with anything. Markers override random faults.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass
from enum import StrEnum

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


_FLAGS = frozenset({"hang", "bad_json", "drop", "empty_choices", "no_usage"})


def parse_markers(text: str) -> Markers:
    """Markers in ``text``; unknown names and statuses outside 400..599 are ignored."""
    if "[[sim:" not in text:
        return Markers()
    flags: set[str] = set()
    status: int | None = None
    latency: int | None = None
    straggle: int | None = None
    for name, value in MARKER_RE.findall(text):
        if name in _FLAGS and not value:
            flags.add(name)
        elif name == "status" and value and 400 <= int(value) <= 599:
            status = int(value)
        elif name == "latency_ms" and value:
            latency = int(value)
        elif name == "straggle_ms" and value:
            straggle = int(value)
    return Markers(
        status=status,
        hang="hang" in flags,
        bad_json="bad_json" in flags,
        drop="drop" in flags,
        latency_ms=latency,
        straggle_ms=straggle,
        empty_choices="empty_choices" in flags,
        no_usage="no_usage" in flags,
    )


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
    """Fixed or lognormal latency, slowed down above the load knee."""

    def __init__(self, config: SimConfig) -> None:
        self._rng = random.Random(f"latency:{config.seed}")
        self._fixed_ms = config.latency_ms
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

    def sample_ms(self, rate_rps: float, inflight: int = 0) -> float:
        """Latency of one request arriving while ``rate_rps`` requests came in the last 1 s
        and ``inflight`` are being served."""
        return self.base_ms() * self.slowdown(rate_rps, inflight)


@dataclass(frozen=True)
class Plan:
    """What happens to one request: its fault, status, latency and answer shape."""

    fault: Fault
    status: int | None
    latency_s: float
    empty_choices: bool = False
    no_usage: bool = False


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
        latency_ms = float(markers.latency_ms)
    else:
        latency_ms = latency.sample_ms(rate_rps, inflight)
    return Plan(
        fault=fault,
        status=status,
        latency_s=latency_ms / 1000.0,
        empty_choices=markers.empty_choices,
        no_usage=markers.no_usage,
    )
