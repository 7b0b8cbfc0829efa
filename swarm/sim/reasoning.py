"""Answers of a thinking model: reasoning first, inside the same max_tokens.

A thinking model generates its reasoning before its answer, and both count against the
request's cap and in ``completion_tokens``. The reasoning's length is
``reasoning_tokens`` when given (``swarm sim --reasoning-tokens N``), else a deterministic
length per request in [REASONING_MIN_TOKENS, REASONING_MAX_TOKENS]. What is left of the
cap goes to the answer, cut there (``finish_reason: "length"``); a cap the reasoning
uses up leaves the content empty, as the providers' thinking models do.
"""

from __future__ import annotations

from dataclasses import replace

from swarm.sim.content import (
    ChatRequest,
    Completion,
    make_completion,
    pseudo_words,
    request_digest,
)
from swarm.sim.tokenizer import CHARS_PER_TOKEN

REASONING_MIN_TOKENS = 64
REASONING_MAX_TOKENS = 512
"""Natural reasoning lengths lie in [REASONING_MIN_TOKENS, REASONING_MAX_TOKENS]."""


def reasoning_length(chat: ChatRequest, fixed: int | None = None) -> int:
    """Tokens of the reasoning for ``chat``: ``fixed``, else derived from the request."""
    if fixed is not None:
        return fixed
    digest = request_digest(chat.model, chat.contents)
    span = REASONING_MAX_TOKENS - REASONING_MIN_TOKENS + 1
    return REASONING_MIN_TOKENS + int(digest[20:28], 16) % span


def thinking_completion(
    chat: ChatRequest,
    reasoning_tokens: int,
    shown: bool = True,
    malformed_rate: float = 0.0,
    answer_tokens: int | None = None,
) -> Completion:
    """The answer of a thinking model: ``reasoning_tokens`` of reasoning (as
    ``reasoning_content`` when ``shown``), then the answer within what is left of the cap."""
    cap = chat.max_tokens
    digest = request_digest(chat.model, chat.contents)
    if cap is not None and cap <= reasoning_tokens:
        text = _reasoning_text(digest, cap) if shown else None
        return Completion("", cap, "length", reasoning_content=text, reasoning_tokens=cap)
    left = None if cap is None else cap - reasoning_tokens
    answer = make_completion(replace(chat, max_tokens=left), malformed_rate, answer_tokens)
    return replace(
        answer,
        completion_tokens=answer.completion_tokens + reasoning_tokens,
        reasoning_content=_reasoning_text(digest, reasoning_tokens) if shown else None,
        reasoning_tokens=reasoning_tokens,
    )


def _reasoning_text(digest: str, tokens: int) -> str:
    return "thinking: " + pseudo_words(digest[::-1], max(0, int(tokens * CHARS_PER_TOKEN) - 10))
