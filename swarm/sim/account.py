"""The provider account behind the simulator: a balance that runs out, and refusals of a
provider's own types, in its error format.

- ``balance_answers = N``: after N answers every chat request is refused with the
  provider's quota error (Moonshot: 429 ``exceeded_current_quota_error`` "Your account ...
  is suspended due to insufficient balance ..."; OpenAI: 429 ``insufficient_quota``;
  DeepSeek: 402 "Insufficient Balance"). ``POST /account {"balance_answers": M}`` tops it up
  (M more answers; null: unlimited), as a person paying would.
- A marker in the last user message forces one refusal for that request:

      [[sim:provider_error=balance]]         the quota error above
      [[sim:provider_error=tpd]]             the daily token limit (429)
      [[sim:provider_error=overloaded]]      the provider overloaded (Moonshot 429
                                             ``engine_overloaded_error``)
      [[sim:provider_error=content_filter]]  the content filter (400)

GET /stats carries ``account``: answers counted, answers left, and the requests refused by
kind (``refused``) with the first balance refusal's request number (``first_refusal_at``:
requests received after it are ``requests - first_refusal_at``).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Literal

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field

from swarm.sim.errors import error_body

ErrorFormat = Literal["moonshot", "openai", "deepseek"]
MARKER = re.compile(r"\[\[sim:provider_error=([a-z_]+)\]\]")
KINDS = ("balance", "tpd", "overloaded", "content_filter")

Refusal = tuple[int, str | None, str | None, str]
"""HTTP status, error ``type``, error ``code``, message."""

REFUSALS: dict[ErrorFormat, dict[str, Refusal]] = {
    "moonshot": {
        "balance": (429, "exceeded_current_quota_error", None,
                    "Your account org-sim<ak-sim> is suspended due to insufficient balance, "
                    "please recharge your account or check your plan and billing details"),
        "tpd": (429, "rate_limit_reached_error", None,
                "request reached organization TPD rate limit, current: 1500012, "
                "limit: 1500000"),
        "overloaded": (429, "engine_overloaded_error", None,
                       "The engine is currently overloaded, please try again later"),
        "content_filter": (400, "content_filter", None,
                           "The request was rejected because it was considered high risk"),
    },
    "openai": {
        "balance": (429, "insufficient_quota", "insufficient_quota",
                    "You exceeded your current quota, please check your plan and billing "
                    "details."),
        "tpd": (429, "tokens", "rate_limit_exceeded",
                "Rate limit reached in organization org-sim on tokens per day (TPD): "
                "Limit 2000000, Used 2000000, Requested 100."),
        "overloaded": (503, "server_error", None,
                       "The engine is currently overloaded, please try again later"),
        "content_filter": (400, "invalid_request_error", "content_filter",
                           "Your request was rejected as a result of our safety system."),
    },
    "deepseek": {
        "balance": (402, "unknown_error", "invalid_request_error", "Insufficient Balance"),
        "tpd": (429, "rate_limit_reached_error", None,
                "Rate Limit Reached: tokens per day used up"),
        "overloaded": (503, "server_error", None, "Server Overloaded"),
        "content_filter": (400, "invalid_request_error", None, "Content Exists Risk"),
    },
}  # fmt: skip
"""Each provider's refusals, as its error-code pages document them."""


class AccountConfig(BaseModel):
    """The simulated account: its balance and its provider's error format."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    balance_answers: int | None = Field(default=None, ge=0)
    """Answers the balance pays for; then every request gets the quota error. None:
    unlimited."""
    error_format: ErrorFormat = "moonshot"
    """Whose error bodies the refusals copy."""


class Account:
    """The account's state on one running simulator."""

    def __init__(self, config: AccountConfig) -> None:
        self.format: ErrorFormat = config.error_format
        self.left = config.balance_answers
        self.answers = 0
        self.refused: Counter[str] = Counter()
        self.requests = 0
        self.first_refusal_at: int | None = None

    def refusal(self, last_user_content: str) -> tuple[int, dict[str, Any]] | None:
        """The refusal of a chat request, or None (it goes on to be served)."""
        self.requests += 1
        found = MARKER.search(last_user_content)
        kind = found.group(1) if found and found.group(1) in KINDS else None
        if kind is None and self.left is not None and self.left <= 0:
            kind = "balance"
        if kind is None:
            return None
        self.refused[kind] += 1
        if kind == "balance" and self.first_refusal_at is None:
            self.first_refusal_at = self.requests
        status, error_type, code, message = REFUSALS[self.format][kind]
        return status, error_body(message, error_type, code)

    def answered(self) -> None:
        """An answer was served (and billed): the balance pays for it."""
        self.answers += 1
        if self.left is not None:
            self.left -= 1

    def snapshot(self) -> dict[str, Any]:
        """The ``account`` field of GET /stats."""
        return {
            "answers": self.answers,
            "balance_answers_left": self.left,
            "refused": dict(self.refused),
            "requests": self.requests,
            "first_refusal_at": self.first_refusal_at,
        }

    async def handle_post(self, request: web.Request) -> web.Response:
        """POST /account ``{"balance_answers": N}``: the balance pays for N more answers
        (null: unlimited); the refusal counts start again."""
        data = await request.json()
        left = data.get("balance_answers") if isinstance(data, dict) else None
        self.left = int(left) if left is not None else None
        self.refused.clear()
        self.first_refusal_at = None
        return web.json_response(self.snapshot())


def mount_account(app: web.Application, account: Account) -> None:
    """Serve POST /account on ``app``."""
    app.router.add_post("/account", account.handle_post)
