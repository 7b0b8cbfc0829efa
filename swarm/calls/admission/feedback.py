"""What a gateway's rate-limit answer says, as pure functions.

``x-ratelimit-{limit,remaining,reset}-{requests,tokens}`` (OpenAI; Moonshot sends the same
names capitalised) and ``Retry-After`` (seconds, fractions or an HTTP date, parsed by
swarm.calls.retry_policy). Resets come as durations such as ``1s``, ``6m0s``, ``20ms``,
``1h2m3.5s`` or a bare number of seconds.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from swarm.calls.retry_policy import MAX_RETRY_AFTER_S, headers_of, parse_retry_after

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


@dataclass(frozen=True)
class RateLimitHeaders:
    """The x-ratelimit-* headers of one answer; None where absent or unparsable."""

    limit_requests: int | None = None
    remaining_requests: int | None = None
    reset_requests_s: float | None = None
    limit_tokens: int | None = None
    remaining_tokens: int | None = None
    reset_tokens_s: float | None = None

    def used_up(self) -> list[float | None]:
        """The resets of the limits said to be used up (0 left; None: no reset given)."""
        limits = (
            (self.remaining_requests, self.reset_requests_s),
            (self.remaining_tokens, self.reset_tokens_s),
        )
        return [reset for remaining, reset in limits if remaining == 0]


def parse_duration_s(value: str | None) -> float | None:
    """``"6m0s"`` -> 360.0, ``"20ms"`` -> 0.02, ``"1.5"`` -> 1.5; None when unparsable."""
    if value is None:
        return None
    text = value.strip().lower()
    if not text[-1:].isalpha():  # a bare number (no exception raised for the usual "6m0s")
        try:
            return max(float(text), 0.0)
        except ValueError:
            return None
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(number) * _UNIT_S[unit] for number, unit in parts)


def int_or_none(value: str | None) -> int | None:
    """A header's whole number; None when absent or unparsable."""
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def parse_ratelimit_headers(headers: Mapping[str, str]) -> RateLimitHeaders:
    """The x-ratelimit-* headers, any capitalisation."""
    low = {k.lower(): v for k, v in headers.items()}
    return RateLimitHeaders(
        limit_requests=int_or_none(low.get("x-ratelimit-limit-requests")),
        remaining_requests=int_or_none(low.get("x-ratelimit-remaining-requests")),
        reset_requests_s=parse_duration_s(low.get("x-ratelimit-reset-requests")),
        limit_tokens=int_or_none(low.get("x-ratelimit-limit-tokens")),
        remaining_tokens=int_or_none(low.get("x-ratelimit-remaining-tokens")),
        reset_tokens_s=parse_duration_s(low.get("x-ratelimit-reset-tokens")),
    )


def pause_after_429_s(headers: Mapping[str, str], now: float) -> float | None:
    """How long every caller of the model should pause after a 429.

    Retry-After first; else the reset of an exhausted dimension (remaining 0); else None
    (the caller uses its default). Capped like Retry-After.
    """
    retry_after = parse_retry_after(headers, now)
    if retry_after is not None:
        return retry_after
    resets = [reset for reset in parse_ratelimit_headers(headers).used_up() if reset is not None]
    return min(max(resets), MAX_RETRY_AFTER_S) if resets else None


def used_up_reset_s(headers: Mapping[str, str]) -> float | None:
    """When an x-ratelimit-remaining-* header says a limit is used up (0 left): seconds
    until its reset (the later one when both are, capped like Retry-After; 0.0 when no
    reset is given). None when no limit is used up (or the gateway sends no such header)."""
    resets = [reset or 0.0 for reset in parse_ratelimit_headers(headers).used_up()]
    return min(max(resets), MAX_RETRY_AFTER_S) if resets else None


def pause_of(exc: BaseException, now: float) -> float | None:
    """The pause a gateway's 429 error asks for (see pause_after_429_s)."""
    return pause_after_429_s(headers_of(exc), now)


def aimd_decrease(factor: float, decrease: float, min_factor: float) -> float:
    """Multiplicative decrease after a 429."""
    return max(min_factor, factor * decrease)


def aimd_increase(factor: float, step: float) -> float:
    """Additive increase after a quiet period; never above 1 (the catalog's limits)."""
    return min(1.0, factor + step)


def limit_exhausted(headers: Mapping[str, str]) -> bool:
    """True when an x-ratelimit-remaining-* header says a limit is used up (0 left)."""
    return bool(parse_ratelimit_headers(headers).used_up())


def exhausted_of(exc: BaseException) -> bool:
    """limit_exhausted for a gateway's error."""
    return limit_exhausted(headers_of(exc))


def decayed(value: float, elapsed_ms: float, window_ms: float) -> float:
    """A count ``elapsed_ms`` later, decaying with time constant ``window_ms`` (a sliding
    window's count without keeping one entry per event)."""
    return value * math.exp(-max(elapsed_ms, 0.0) / window_ms)


def tenant_limited(
    exhausted: bool, recent_429: float, recent_requests: float, dense_min: float, dense_share: float
) -> bool:
    """Whether a 429 is evidence that the tenant is at its limit (pause every caller) rather
    than an isolated one (back off that call only): the gateway said a limit is used up,
    or 429s are dense among the model's recent requests, as in client-side adaptive
    throttling (Google SRE: requests vs accepts over a sliding window). ``recent_*``
    include the 429 being judged."""
    return exhausted or dense_429s(recent_429, recent_requests, dense_min, dense_share)


def dense_429s(
    recent_429: float, recent_requests: float, dense_min: float, dense_share: float
) -> bool:
    """Whether 429s are dense among the model's recent requests: then admission's picture
    of the limit is wrong, and the shared rate is cut (AIMD). A single exhausted limit is
    not: its pause until the gateway's reset is the whole correction (the spacing was
    right, an arrival shifted)."""
    return recent_429 >= dense_min and recent_429 >= dense_share * recent_requests
