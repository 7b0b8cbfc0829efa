"""Context windows learned from the gateway: a context-length 400 states the window.

Servers word it differently; each pattern below is one server's wording (tests hold an
example of each). The window found is remembered per model (in the process, or shared by
every worker through Redis: SharedWindows), so the next fits of that model use it instead
of the catalog's number.
"""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass

from swarm.calls.admission.limits import ewma
from swarm.calls.shared_learning import SharedLearning

log = logging.getLogger(__name__)

WINDOW_PATTERNS = (
    # OpenAI, vLLM, llama-cpp-python: "This model's maximum context length is 4096 tokens."
    re.compile(r"maximum context length is (\d+) tokens", re.IGNORECASE),
    # llama.cpp server: "request (5127 tokens) exceeds the available context size (4096 tokens)"
    re.compile(r"available context size \((\d+) tokens\)", re.IGNORECASE),
    # llama.cpp (older): "Requested tokens (5127) exceed context window of 4096"
    re.compile(r"context window of (\d+)", re.IGNORECASE),
)
REQUESTED_PATTERNS = (
    re.compile(r"you requested (\d+) tokens", re.IGNORECASE),  # OpenAI chat, vLLM, llama-cpp
    re.compile(r"messages resulted in (\d+) tokens", re.IGNORECASE),  # OpenAI
    re.compile(r"request \((\d+) tokens\)", re.IGNORECASE),  # llama.cpp server
    re.compile(r"requested tokens \((\d+)\)", re.IGNORECASE),  # llama.cpp (older)
    re.compile(r"request has (\d+) input tokens", re.IGNORECASE),  # vLLM (newer)
)


@dataclass(frozen=True)
class Overflow:
    """What a context-length error says."""

    window: int
    """The model's context window, in the server's tokens."""
    requested: int | None
    """Tokens the request asked for (prompt, and with most servers the completion too)."""


def _first(patterns: tuple[re.Pattern[str], ...], text: str) -> int | None:
    for pattern in patterns:
        if (found := pattern.search(text)) is not None:
            return int(found.group(1))
    return None


def parse_overflow(message: str) -> Overflow | None:
    """The window (and tokens requested) a context-length error states, or None."""
    window = _first(WINDOW_PATTERNS, message)
    if window is None or window <= 0:
        return None
    return Overflow(window, _first(REQUESTED_PATTERNS, message))


CALIBRATION_WEIGHT = 0.3
"""EWMA weight of the newest prompt's tokens-per-estimated-token ratio."""


class LearnedWindows:
    """What the gateway taught this process per model: context windows smaller than the
    catalog's, and how many of its tokens one offline-estimated token is (its tokenizer
    against the ~4 characters per token estimate), from the prompt_tokens it reports."""

    def __init__(self) -> None:
        self._windows: dict[str, int] = {}
        self._scales: dict[str, float] = {}
        self._lock = threading.Lock()

    def calibrate(self, model: str, estimated: int, actual: int) -> None:
        """Fold one prompt's reported tokens against its estimate into the model's scale."""
        if estimated <= 0 or actual <= 0:
            return
        with self._lock:
            old = self._scales.get(model)
            self._scales[model] = ewma(old, actual / estimated, CALIBRATION_WEIGHT)

    def scale(self, model: str) -> float:
        """Server tokens per estimated token for ``model`` (never below 1: an estimate
        that overcounts only leaves room unused)."""
        with self._lock:
            return max(1.0, self._scales.get(model, 1.0))

    def learn(self, model: str, window: int) -> None:
        """Remember ``window`` for ``model`` (the smallest one seen wins)."""
        with self._lock:
            self._windows[model] = min(window, self._windows.get(model, window))

    def window(self, model: str, catalog_window: int) -> int:
        """The model's window: the learned one when smaller than the catalog's."""
        with self._lock:
            return min(catalog_window, self._windows.get(model, catalog_window))


class SharedWindows(SharedLearning, LearnedWindows):
    """LearnedWindows shared by every worker of a deployment through Redis: one hash per
    gateway (``window:<model>``, ``scale:<model>``), read at most once a second per
    process. What one worker learns from an overflow or a prompt's reported tokens, the
    others use on their next fits. Redis unreachable: the process's own values serve."""

    WHAT = "learned windows"

    def _apply(self, field: str, value: str) -> None:
        kind, _, model = field.partition(":")
        if kind == "window":
            self._windows[model] = int(float(value))
        elif kind == "scale":
            self._scales[model] = float(value)

    def _store(self, field: str, value: float) -> None:
        self.shared.put(field, repr(value))

    def calibrate(self, model: str, estimated: int, actual: int) -> None:
        """Fold one prompt into the shared scale."""
        self._refresh()
        super().calibrate(model, estimated, actual)
        with self._lock:
            scale = self._scales.get(model)
        if scale is not None:
            self._store(f"scale:{model}", scale)

    def scale(self, model: str) -> float:
        """The shared scale (at most a second old)."""
        self._refresh()
        return super().scale(model)

    def learn(self, model: str, window: int) -> None:
        """Remember and share ``window`` (the smallest one seen wins)."""
        self.shared.read_next()  # a window learned elsewhere may be smaller
        self._refresh()
        super().learn(model, window)
        with self._lock:
            learned = self._windows[model]
        self._store(f"window:{model}", learned)

    def window(self, model: str, catalog_window: int) -> int:
        """The shared window (at most a second old)."""
        self._refresh()
        return super().window(model, catalog_window)
