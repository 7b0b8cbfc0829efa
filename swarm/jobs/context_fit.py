"""Context overflow: keep an input's head and tail, summarise the middle.

An input whose estimated tokens exceed the model's budget keeps its first 70% and last 20%
of the budget verbatim; the middle goes to a summary sub-call on the fast model, and the
summary takes the remaining 10%. Sizes are recorded so the envelope can say what was cut.
"""

from __future__ import annotations

from dataclasses import dataclass

from swarm.records import Truncation
from swarm.tokens import estimate_tokens

HEAD_SHARE = 0.7
TAIL_SHARE = 0.2
SUMMARY_SHARE = 0.1


@dataclass(frozen=True)
class Split:
    """An input cut for its budget: head and tail kept, middle to summarise."""

    head: str
    middle: str
    tail: str
    original_tokens: int

    def truncation(self, summary: str) -> Truncation:
        """The record of this split once the middle is summarised."""
        return Truncation(
            original_chars=len(self.head) + len(self.middle) + len(self.tail),
            original_tokens=self.original_tokens,
            kept_chars=len(self.head) + len(self.tail),
            summarized_chars=len(self.middle),
            summary_chars=len(summary),
        )

    def join(self, summary: str) -> str:
        """The fitted input."""
        marker = f"[... {len(self.middle)} characters summarised: ...]"
        return f"{self.head}\n\n{marker}\n{summary}\n[...]\n\n{self.tail}"


def input_budget_tokens(context_window: int, max_tokens: int, overhead_tokens: int) -> int:
    """Tokens an input may take: the window less the answer and the prompt around it."""
    return max(context_window - max_tokens - overhead_tokens, 256)


def split_for_budget(text: str, budget_tokens: int) -> Split | None:
    """None when ``text`` fits ``budget_tokens``; else its head, middle and tail."""
    tokens = estimate_tokens(text)
    if tokens <= budget_tokens:
        return None
    chars_per_token = len(text) / tokens
    head = int(budget_tokens * HEAD_SHARE * chars_per_token)
    tail = int(budget_tokens * TAIL_SHARE * chars_per_token)
    return Split(text[:head], text[head : len(text) - tail], text[len(text) - tail :], tokens)


def summary_budget_tokens(budget_tokens: int) -> int:
    """Completion tokens the middle's summary may use."""
    return max(int(budget_tokens * SUMMARY_SHARE), 64)


def clip_to_tokens(text: str, budget_tokens: int) -> str:
    """The head of ``text`` that fits ``budget_tokens`` (for the summariser's own window)."""
    tokens = estimate_tokens(text)
    if tokens <= budget_tokens:
        return text
    return text[: int(len(text) * budget_tokens / tokens)]
