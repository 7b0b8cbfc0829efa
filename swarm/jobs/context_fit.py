"""Context overflow: keep an input's head and tail, summarise the middle.

An input whose estimated tokens exceed the model's budget keeps its first 70% and last 20%
of the budget verbatim; the middle goes to a summary sub-call on the fast model, and the
summary takes the remaining 10%. Sizes are recorded so the envelope can say what was cut.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from swarm.catalog import Catalog, ModelSpec
from swarm.errors import InputError
from swarm.records import Truncation
from swarm.tokens import estimate_tokens

if TYPE_CHECKING:
    from swarm.calls.runtime import Runtime

HEAD_SHARE = 0.7
TAIL_SHARE = 0.2
SUMMARY_SHARE = 0.1
MIN_INPUT_TOKENS = 256
"""Tokens an input always keeps, whatever the answer's cap leaves of the window."""


@dataclass(frozen=True)
class Split:
    """An input cut for its budget: head and tail kept, middle to summarise."""

    head: str
    middle: str
    tail: str
    original_tokens: int

    def truncation(self, summary: str, max_tokens: int | None = None) -> Truncation:
        """The record of this split once the middle is summarised (``max_tokens``: the
        job's cap, when it is why the input did not fit; see ``cut_by_cap``)."""
        return Truncation(
            original_chars=len(self.head) + len(self.middle) + len(self.tail),
            original_tokens=self.original_tokens,
            kept_chars=len(self.head) + len(self.tail),
            summarized_chars=len(self.middle),
            summary_chars=len(summary),
            max_tokens=max_tokens,
        )

    def join(self, summary: str) -> str:
        """The fitted input."""
        marker = f"[... {len(self.middle)} characters summarised: ...]"
        return f"{self.head}\n\n{marker}\n{summary}\n[...]\n\n{self.tail}"


def fitting_window(rt: Runtime, model: ModelSpec, scale: float | None = None) -> int:
    """The model's window in estimated tokens: the one the gateway stated when smaller than
    the catalog's, divided by how many of its tokens one estimated token is (``scale``, by
    default the one learned)."""
    window = rt.windows.window(model.name, model.context_window)
    return int(window / (scale or rt.windows.scale(model.name)))


def input_budget_tokens(context_window: int, max_tokens: int, overhead_tokens: int) -> int:
    """Tokens an input may take: the window less the answer and the prompt around it."""
    return max(context_window - max_tokens - overhead_tokens, MIN_INPUT_TOKENS)


def node_models(catalog: Catalog, model: str | None, kind: str) -> list[ModelSpec]:
    """The models a job's nodes may call: the one named, or the kind's route (its first
    model and the fallbacks)."""
    if model:
        return [catalog.model(model)]
    return [catalog.route(kind), *map(catalog.model, catalog.routing[kind][1:])]


def check_max_tokens(max_tokens: int | None, models: Iterable[ModelSpec]) -> None:
    """Refuse a job's answer cap that leaves no room for an input in the window of a model
    its nodes may call (InputError naming the model and its window): the request would be
    refused by the gateway, or every input cut to MIN_INPUT_TOKENS and summarised."""
    if max_tokens is None:
        return
    for model in models:
        most = model.context_window - MIN_INPUT_TOKENS
        if max_tokens > most:
            raise InputError(
                f"max_tokens {max_tokens:,} (--max-tokens) does not fit {model.name}'s context "
                f"window of {model.context_window:,} tokens, which also holds the input: "
                f"at most {max(most, 0):,}"
            )


def split_for_budget(text: str, budget_tokens: int) -> Split | None:
    """None when ``text`` fits ``budget_tokens``; else its head, middle and tail."""
    tokens = estimate_tokens(text)
    if tokens <= budget_tokens:
        return None
    chars_per_token = len(text) / tokens
    head = int(budget_tokens * HEAD_SHARE * chars_per_token)
    tail = int(budget_tokens * TAIL_SHARE * chars_per_token)
    return Split(text[:head], text[head : len(text) - tail], text[len(text) - tail :], tokens)


def cut_by_cap(
    text: str, window: int, overhead_tokens: int, job_cap: int | None, model_cap: int
) -> int | None:
    """``job_cap`` when the job's answer cap, not the model's own, is why ``text`` does
    not fit ``window`` (it would fit with ``model_cap``); else None."""
    if job_cap is None or job_cap <= model_cap:
        return None
    room = input_budget_tokens(window, model_cap, overhead_tokens)
    return job_cap if split_for_budget(text, room) is None else None


def summary_budget_tokens(budget_tokens: int) -> int:
    """Completion tokens the middle's summary may use."""
    return max(int(budget_tokens * SUMMARY_SHARE), 64)


def clip_to_tokens(text: str, budget_tokens: int) -> str:
    """The head of ``text`` that fits ``budget_tokens`` (for the summariser's own window)."""
    tokens = estimate_tokens(text)
    if tokens <= budget_tokens:
        return text
    return text[: int(len(text) * budget_tokens / tokens)]
