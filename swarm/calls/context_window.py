"""Context windows learned from the gateway: a context-length 400 states the window.

Servers word it differently; each pattern below is one server's wording (tests hold an
example of each). The window found is remembered per model in the process, so the next
fits of that model use it instead of the catalog's number.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass

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
        ratio = actual / estimated
        with self._lock:
            old = self._scales.get(model)
            new = (
                ratio
                if old is None
                else old * (1 - CALIBRATION_WEIGHT) + ratio * CALIBRATION_WEIGHT
            )
            self._scales[model] = new

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
