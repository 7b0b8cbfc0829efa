"""What a provider's refusal means: its HTTP status read with its body's ``error.type``,
``error.code`` and message, by a table kept as data (``RULES``) and pure functions over it.

Status alone cannot tell a rate limit from an empty account: Moonshot answers both with
429 (``rate_limit_reached_error`` and ``exceeded_current_quota_error``), as OpenAI does
(``rate_limit_exceeded`` and ``insufficient_quota``). The first rule that matches a refusal
gives its ErrorKind; a refusal no rule matches is classified by its status
(swarm.calls.retry_policy).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from swarm.records import ErrorKind


@dataclass(frozen=True)
class Rule:
    """One kind of refusal: the statuses it comes with, and the ``error.type``/``error.code``
    values or message phrases (lower case) that name it. An empty field matches anything;
    a rule matches when every field does."""

    kind: ErrorKind
    statuses: frozenset[int]
    types: frozenset[str] = frozenset()
    phrases: tuple[str, ...] = ()


_QUOTA_STATUSES = frozenset({402, 403, 429})
_OVERLOAD_STATUSES = frozenset({429, 503, 529})

RULES: tuple[Rule, ...] = (
    # Moonshot 429 (older: 403); OpenAI 429
    Rule(
        ErrorKind.INSUFFICIENT_BALANCE,
        _QUOTA_STATUSES,
        frozenset({"exceeded_current_quota_error", "insufficient_quota"}),
    ),
    Rule(
        ErrorKind.INSUFFICIENT_BALANCE,
        _QUOTA_STATUSES,
        phrases=("insufficient balance", "insufficient_balance", "exceeded your current quota"),
    ),
    Rule(ErrorKind.INSUFFICIENT_BALANCE, frozenset({402})),  # DeepSeek; Payment Required
    # Moonshot: "request reached organization TPD rate limit, current: X, limit: Y"
    Rule(
        ErrorKind.DAILY_LIMIT,
        frozenset({429}),
        phrases=("tpd rate limit", "tokens per day", "rpd rate limit", "requests per day"),
    ),
    Rule(
        ErrorKind.OVERLOADED,
        _OVERLOAD_STATUSES,
        frozenset({"engine_overloaded_error", "overloaded_error", "server_overloaded"}),
    ),
    Rule(ErrorKind.OVERLOADED, _OVERLOAD_STATUSES, phrases=("overloaded",)),
    # Moonshot 400 content_filter: "... rejected because it was considered high risk";
    # DeepSeek 400 "Content Exists Risk"
    Rule(ErrorKind.CONTENT_FILTER, frozenset({400, 403, 451}), frozenset({"content_filter"})),
    Rule(
        ErrorKind.CONTENT_FILTER,
        frozenset({400, 403, 451}),
        phrases=("considered high risk", "content_filter", "content filter", "content exists risk"),
    ),
)
"""Known refusals, most specific first (a quota error mentioning a rate limit is still a
quota error). Sources: the providers' error-code pages (../shared/notes/providers.md)."""


@dataclass(frozen=True)
class Refusal:
    """A provider's refusal as read from its answer."""

    status: int
    type: str | None
    """``error.type`` (or ``error.code`` when the body has no type)."""
    message: str
    """``error.message`` on one line (the provider's own words), or ''."""
    kind: ErrorKind | None
    """The matching rule's kind; None when no rule matches (classify by status)."""

    def describe(self) -> str:
        """``HTTP 429 exceeded_current_quota_error: Your account ...`` (at most 300 chars)."""
        named = f"HTTP {self.status}" + (f" {self.type}" if self.type else "")
        return (f"{named}: {self.message}" if self.message else named)[:300]


def _text(value: object) -> str:
    return " ".join(value.split()) if isinstance(value, str) else ""


def _error_of(body: object) -> Mapping[str, object]:
    """The ``error`` object of a body (the openai SDK keeps it unwrapped), or {}."""
    if not isinstance(body, Mapping):
        return {}
    inner = body.get("error", body)
    if isinstance(inner, Mapping):
        return inner
    return {"message": inner} if isinstance(inner, str) else {}


def matches(rule: Rule, status: int, names: frozenset[str], message: str) -> bool:
    """True when ``rule`` holds for a refusal with these status, type/code names and message."""
    if rule.statuses and status not in rule.statuses:
        return False
    if rule.types and not rule.types & names:
        return False
    return not rule.phrases or any(phrase in message for phrase in rule.phrases)


def read_refusal(status: int, body: object, rules: tuple[Rule, ...] = RULES) -> Refusal:
    """The refusal of an HTTP ``status`` answer whose JSON body is ``body`` (a string body
    counts as its message)."""
    error = _error_of(body) if not isinstance(body, str) else {"message": body}
    kind_name, code = _text(error.get("type")), _text(error.get("code"))
    message = _text(error.get("message"))
    names = frozenset(n.lower() for n in (kind_name, code) if n)
    lowered = message.lower()
    kind = next((r.kind for r in rules if matches(r, status, names, lowered)), None)
    return Refusal(status, kind_name or code or None, message, kind)


FINAL_FOR_BACKEND: frozenset[ErrorKind] = frozenset({ErrorKind.INSUFFICIENT_BALANCE})
"""Kinds no call of the backend can escape until a person acts; AUTH joins them on 401."""


def final_for_backend(kind: ErrorKind, status: int | None) -> bool:
    """True when a refusal of ``kind`` means no call of its backend can succeed: an empty
    balance, or a 401 (the key is refused; a 403 may concern one model only)."""
    return kind in FINAL_FOR_BACKEND or (kind is ErrorKind.AUTH and status == 401)


DAY_S = 86_400.0


def next_utc_midnight(now: float) -> float:
    """The epoch second of the next 00:00 UTC after ``now`` (daily limits' documented-less
    default reset): epoch time counts every day as DAY_S seconds."""
    return (now // DAY_S + 1) * DAY_S


def daily_reset_at(headers: Mapping[str, str], now: float) -> float:
    """When a daily limit resets: the answer's ``Retry-After`` (seconds) when it names one,
    else the next 00:00 UTC (Moonshot's TPD refusal names none)."""
    lowered = {k.lower(): v for k, v in headers.items()}
    try:
        seconds = float(lowered.get("retry-after", ""))
    except ValueError:
        return next_utc_midnight(now)
    return now + max(seconds, 0.0)
