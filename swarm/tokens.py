"""Offline token estimates: no tokenizer downloads at run time.

A calibrated characters-per-token ratio is what we can ship without model files; BPE
tokenizers for English and code average about 4 characters per token, while CJK text runs
closer to 1.5. We count the two classes separately so Chinese prompts are not underestimated.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

CHARS_PER_TOKEN = 4.0
CJK_CHARS_PER_TOKEN = 1.5
MESSAGE_OVERHEAD_TOKENS = 4
"""Role and separator tokens the chat format adds per message."""


_WIDE_RUN = re.compile("[\u2e80-\U0010ffff]+")
"""Runs of CJK (and other wide) characters: code points from U+2E80 up."""


def _wide_chars(text: str) -> int:
    """Characters of ``text`` from U+2E80 up, counted in C (a regex): a per-character Python
    loop over a large input would hold the GIL of the worker's every thread for seconds."""
    if text.isascii():
        return 0
    return sum(len(run) for run in _WIDE_RUN.findall(text))


def estimate_tokens(text: str) -> int:
    """Tokens in ``text``, rounded up; 0 for an empty string."""
    if not text:
        return 0
    wide = _wide_chars(text)
    narrow = len(text) - wide
    return max(1, round(narrow / CHARS_PER_TOKEN + wide / CJK_CHARS_PER_TOKEN + 0.499))


def estimate_messages(contents: Iterable[str]) -> int:
    """Prompt tokens of a chat request whose message contents are ``contents``."""
    return sum(estimate_tokens(c) + MESSAGE_OVERHEAD_TOKENS for c in contents)
