"""A profile's request rules applied to one request body (swarm.sim.profiles).

``thinking_on`` says whether the model thinks for this body; ``refusal`` is the HTTP 400
the provider answers a body that breaks one of its rules, checked in this order: a
refused field, a fixed field at another value, an assistant tool-call message sent back
without its ``reasoning_content`` while thinking is on. Pure functions of the body.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from swarm.sim.profiles import ModelRules, Profile

INVALID_REQUEST = "invalid_request_error"


@dataclass(frozen=True)
class Refusal:
    """A 400 the provider answers, with its body."""

    message: str
    param: str | None = None
    code: str | None = None

    def body(self, profile: Profile) -> dict[str, Any]:
        """The JSON body, shaped as ``profile``'s provider shapes it."""
        error: dict[str, Any] = {"message": self.message, "type": INVALID_REQUEST}
        if profile.error_shape == "openai":
            error["param"] = self.param
            error["code"] = self.code or INVALID_REQUEST
        return {"error": error}


def thinking_on(rules: ModelRules, body: object) -> bool:
    """Whether the model thinks for this body (``"thinking": {"type": ...}`` decides for
    the models that let it)."""
    if rules.thinking in ("never", "always"):
        return rules.thinking == "always"
    thinking = body.get("thinking") if isinstance(body, dict) else None
    asked = thinking.get("type") if isinstance(thinking, dict) else None
    if asked in ("enabled", "disabled"):
        return bool(asked == "enabled")
    return rules.thinking == "default_on"


def refusal(profile: Profile, body: object) -> Refusal | None:
    """The 400 ``profile`` answers ``body`` with, or None when the body is accepted (or
    is no JSON object: swarm.sim.content refuses that)."""
    if not isinstance(body, dict):
        return None
    rules = profile.rules_for(str(body.get("model", "")))
    thinking = thinking_on(rules, body)
    return (
        _refused_field(profile, rules, body)
        or _fixed_field(profile, rules, body, thinking)
        or _missing_reasoning(profile, rules, body, thinking)
    )


def _refused_field(profile: Profile, rules: ModelRules, body: dict[str, Any]) -> Refusal | None:
    for name, instead in rules.refused:
        if body.get(name) is not None:
            message = profile.refused_message.format(field=name, instead=instead)
            return Refusal(message, param=name, code="unsupported_parameter")
    return None


def _fixed_field(
    profile: Profile, rules: ModelRules, body: dict[str, Any], thinking: bool
) -> Refusal | None:
    for fixed in rules.fixed:
        given = body.get(fixed.name)
        if given is None:
            continue
        allowed = fixed.allowed(thinking)
        if _number(given) != allowed:
            message = profile.fixed_message.format(
                field=fixed.name, allowed=f"{allowed:g}", given=_shown(given)
            )
            return Refusal(message, param=fixed.name, code="unsupported_value")
    return None


def _missing_reasoning(
    profile: Profile, rules: ModelRules, body: dict[str, Any], thinking: bool
) -> Refusal | None:
    if not (thinking and rules.echo_reasoning):
        return None
    messages = body.get("messages")
    for index, message in enumerate(messages if isinstance(messages, list) else ()):
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        if message.get("tool_calls") and not isinstance(message.get("reasoning_content"), str):
            return Refusal(profile.echo_message.format(index=index), param="messages")
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _shown(value: Any) -> str:
    return f"{value:g}" if _number(value) is not None else repr(value)
