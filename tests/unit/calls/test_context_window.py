"""Context-length errors: each server's wording gives the window (and what was asked)."""

from __future__ import annotations

import pytest

from swarm.calls.context_window import LearnedWindows, Overflow, parse_overflow

WORDINGS = [
    (  # OpenAI chat completions
        "This model's maximum context length is 8192 tokens. However, your messages resulted "
        "in 9013 tokens. Please reduce the length of the messages.",
        Overflow(8192, 9013),
    ),
    (  # llama-cpp-python's server (as seen against SmolLM2 with n_ctx 4096)
        "Error code: 400 - {'error': {'message': \"This model's maximum context length is 4096 "
        "tokens. However, you requested 5127 tokens (3079 in the messages, 2048 in the "
        'completion). Please reduce the length of the messages or completion."}}',
        Overflow(4096, 5127),
    ),
    (  # llama.cpp's own server
        "request (5127 tokens) exceeds the available context size (4096 tokens), try increasing it",
        Overflow(4096, 5127),
    ),
    (  # vLLM (newer wording)
        "'max_tokens' or 'max_completion_tokens' is too large: 2048. This model's maximum "
        "context length is 4096 tokens and your request has 3079 input tokens "
        "(2048 > 4096 - 3079).",
        Overflow(4096, 3079),
    ),
    (  # vLLM (older wording, as OpenAI's)
        "This model's maximum context length is 2048 tokens. However, you requested 2100 "
        "tokens (1900 in the messages, 200 in the completion).",
        Overflow(2048, 2100),
    ),
]


@pytest.mark.parametrize(("message", "expected"), WORDINGS)
def test_each_wording_states_the_window(message: str, expected: Overflow) -> None:
    assert parse_overflow(message) == expected


@pytest.mark.parametrize("message", ["", "context length exceeded", "Bad request: max_tokens"])
def test_a_message_without_a_window_is_none(message: str) -> None:
    assert parse_overflow(message) is None


def test_the_smallest_window_learned_wins_and_never_grows_the_catalogs() -> None:
    windows = LearnedWindows()
    assert windows.window("m", 262_144) == 262_144
    windows.learn("m", 8192)
    windows.learn("m", 16_384)
    assert windows.window("m", 262_144) == 8192
    assert windows.window("m", 4096) == 4096
