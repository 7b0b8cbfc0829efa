"""The simulated gateway's token counter.

The simulator stands for a provider, which counts with its own tokenizer, so it does not
share the client's estimator (swarm.tokens): it keeps its own count, by the same rule of
thumb (about 4 characters a token for Latin text and code, 1.5 for CJK) so that the usage
it reports stays close to what swarm estimates before a call.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

CHARS_PER_TOKEN = 4.0
WIDE_CHARS_PER_TOKEN = 1.5
PER_MESSAGE_TOKENS = 4
_WIDE_RUN = re.compile("[\u2e80-\U0010ffff]+")


def count_tokens(text: str) -> int:
    """Tokens the gateway bills for ``text`` (at least 1 for non-empty text)."""
    if not text:
        return 0
    wide = 0 if text.isascii() else sum(map(len, _WIDE_RUN.findall(text)))
    estimate = (len(text) - wide) / CHARS_PER_TOKEN + wide / WIDE_CHARS_PER_TOKEN
    return max(1, round(estimate + 0.499))


def count_messages(contents: Iterable[str]) -> int:
    """Prompt tokens of a chat request whose message contents are ``contents``."""
    return sum(count_tokens(c) + PER_MESSAGE_TOKENS for c in contents)
