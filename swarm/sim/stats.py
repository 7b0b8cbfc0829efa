"""The simulator's counters, as GET /stats reports them (see ``Stats``)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, fields
from typing import Any

from swarm.sim.batch_records import BatchStats
from swarm.sim.limits import MINUTE_S, SECOND_S, PeakCounter
from swarm.sim.slots import SlotTracker


@dataclass
class ModelStats:
    """Counters of one model; tokens only for answers that carried usage."""

    requests: int = 0
    completed: int = 0
    rate_limited: int = 0
    errors: int = 0
    client_errors: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    cancelled: int = 0
    abandoned: int = 0
    inflight: int = 0
    max_inflight_seen: int = 0
    truncated: int = 0
    max_tokens_seen: Counter[str] = field(default_factory=Counter)
    admitted_60s: PeakCounter = field(default_factory=lambda: PeakCounter(MINUTE_S))
    admitted_1s: PeakCounter = field(default_factory=lambda: PeakCounter(SECOND_S))

    def snapshot(self) -> dict[str, Any]:
        """Counters as a JSON-ready dict, in field order (without the windows)."""
        counters = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in _WINDOWS}
        return {**counters, "max_tokens_seen": dict(self.max_tokens_seen)}


_WINDOWS = ("admitted_60s", "admitted_1s")


def _fresh_faults() -> dict[str, int]:
    return {"hang": 0, "bad_json": 0, "drop": 0, "empty_choices": 0, "no_usage": 0}


@dataclass
class Stats:
    """Gateway-wide counters: ``total`` sums every model, ``models`` splits them.

    GET /stats fields: ``requests`` (every chat request received, even 400/401),
    ``completed`` (200 answers carrying usage that were written to the socket),
    ``rate_limited`` (429s), ``errors`` (5xx), ``client_errors`` (other 4xx),
    ``prompt_tokens``/``completion_tokens``/``cached_tokens``/``reasoning_tokens``
    (summed over completed answers only, i.e. exactly the usage clients saw whatever the
    usage format wrote: ``reasoning_tokens`` are the thinking models' reasoning, inside
    ``completion_tokens``, counted even when the format does not report them),
    ``cancelled`` (admitted requests whose client went away before the answer, e.g. a
    hedge's loser), ``abandoned`` (with ``finish_abandoned``: answers computed to the end
    after their client went away, counted in ``completed`` and the tokens too, as the
    server billed them), ``inflight`` and
    ``max_inflight_seen`` (admitted requests being served, hangs included), ``truncated``
    (completed answers cut at the request's max_tokens: ``finish_reason: "length"``),
    ``max_tokens_seen`` (``{"N": requests}``: the cap each parsed request asked, the
    smaller of max_tokens and max_completion_tokens, ``"none"`` without one), ``faults``
    (hang, bad_json, drop, empty_choices, no_usage), ``models`` (the same per model) and
    ``windows`` (per model: most requests admitted in any sliding 60 s and 1 s window),
    ``slots`` (``overlaps``: requests admitted while an identical one was in service, i.e.
    two runs calling for one node at once; ``max_concurrent``: most at once; swarm.sim.slots).
    """

    total: ModelStats = field(default_factory=ModelStats)
    slots: SlotTracker = field(default_factory=SlotTracker)
    faults: dict[str, int] = field(default_factory=_fresh_faults)
    models: dict[str, ModelStats] = field(default_factory=dict)
    batch: BatchStats = field(default_factory=BatchStats)
    """The Batch API's counters (swarm.sim.batch_records), apart from the live ones."""

    def model(self, name: str) -> ModelStats:
        """Counters of model ``name`` (created on first use)."""
        stats = self.models.get(name)
        if stats is None:
            stats = self.models[name] = ModelStats()
        return stats

    def of(self, name: str) -> tuple[ModelStats, ModelStats]:
        """The counters a request of model ``name`` adds to: the total and the model's."""
        return self.total, self.model(name)

    def count_status(self, model: str | None, status: int) -> None:
        """Count a non-200 answer under rate_limited, errors or client_errors (the total's
        only when the request named no model)."""
        for stats in (self.total,) if model is None else self.of(model):
            if status == 429:
                stats.rate_limited += 1
            elif status >= 500:
                stats.errors += 1
            elif status >= 400:
                stats.client_errors += 1

    def enter(self, model: str, now: float) -> None:
        """An admitted request of ``model`` starts being served."""
        for stats in self.of(model):
            stats.inflight += 1
            stats.max_inflight_seen = max(stats.max_inflight_seen, stats.inflight)
        model_stats = self.model(model)
        model_stats.admitted_60s.add(now)
        model_stats.admitted_1s.add(now)

    def leave(self, model: str) -> None:
        """A served request of ``model`` ends (answered, failed or gone)."""
        for stats in self.of(model):
            stats.inflight -= 1

    def count_usage(self, model: str, counted: tuple[int, int, int, int], cut: bool) -> None:
        """A completed answer's (prompt, completion, cached, reasoning) tokens; ``cut``
        when it stopped at the request's max_tokens."""
        prompt, completion, cached, reasoning = counted
        for stats in self.of(model):
            stats.completed += 1
            stats.prompt_tokens += prompt
            stats.completion_tokens += completion
            stats.cached_tokens += cached
            stats.reasoning_tokens += reasoning
            stats.truncated += int(cut)

    def reset(self) -> None:
        """Zero every counter; requests still in flight stay counted as in flight."""
        self.faults = _fresh_faults()
        self.total = _restart(self.total)
        self.models = {name: _restart(stats) for name, stats in self.models.items()}
        self.slots.reset()
        self.batch.reset()

    def snapshot(self) -> dict[str, Any]:
        """The JSON of GET /stats."""
        return {
            **self.total.snapshot(),
            "faults": dict(self.faults),
            "models": {name: stats.snapshot() for name, stats in self.models.items()},
            "slots": self.slots.snapshot(),
            "batch": self.batch.snapshot(),
            "windows": {
                name: {
                    "max_requests_60s": stats.admitted_60s.peak,
                    "max_requests_1s": stats.admitted_1s.peak,
                }
                for name, stats in self.models.items()
            },
        }


def _restart(stats: ModelStats) -> ModelStats:
    return ModelStats(inflight=stats.inflight, max_inflight_seen=stats.inflight)
