"""Provider profiles: the documented request rules and answer shapes of real providers,
as data (``swarm sim --provider NAME``); swarm.sim.rules applies them.

A profile names its usage format (swarm.sim.usage), how it words and shapes a refusal,
and per model (fnmatch patterns, first match wins) which fields it fixes or refuses,
whether the model thinks, and whether it asks for the reasoning back in tool loops:

- ``plain``: no rules (the simulator before profiles).
- ``moonshot``: kimi-k2.5/k2.6 fix temperature (1 with thinking on, 0.6 off), top_p 0.95,
  n 1, presence_penalty and frequency_penalty 0, any other value is a 400
  ("invalid temperature: only 1 is allowed for this model"); thinking is on unless the
  body says ``"thinking": {"type": "disabled"}``; the kimi-k2-thinking models always
  think. With thinking on, every assistant message with tool calls sent back must keep
  its ``reasoning_content``.
- ``openai``: reasoning models (o1/o3/o4 and the gpt-5 family) refuse ``max_tokens`` (use
  ``max_completion_tokens``) and any temperature or top_p but the default 1; they always
  reason, and the reasoning is not shown (only counted in the usage).
- ``deepseek``: deepseek-reasoner always thinks; deepseek-v4 models think unless disabled,
  deepseek-v3.2 when ``"thinking": {"type": "enabled"}``; the reasoning must be passed back
  in tool loops, as on Moonshot.
- ``anthropic-compat``: no request rules; Anthropic's usage convention (cache reads and
  writes on top of the input tokens).

Messages follow the providers' own wording as their users have quoted it.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Literal, get_args

from swarm.sim.usage import UsageFormat

ProviderName = Literal["plain", "moonshot", "openai", "deepseek", "anthropic-compat"]
PROVIDERS: tuple[str, ...] = get_args(ProviderName)

Thinking = Literal["never", "always", "default_on", "default_off"]
"""Whether a model thinks: never, always (the body cannot turn it off), or by default
on/off with ``"thinking": {"type": "enabled" | "disabled"}`` in the body deciding."""
ErrorShape = Literal["moonshot", "openai"]
"""A refusal's body: ``{"error": {message, type}}`` (Moonshot's) or
``{"error": {message, type, param, code}}`` (OpenAI's, DeepSeek's)."""


@dataclass(frozen=True)
class FixedField:
    """A sampling field the model allows at one value only (omitting it is fine)."""

    name: str
    thinking_on: float
    """The allowed value while the model thinks (and for a model that never thinks)."""
    thinking_off: float
    """The allowed value with thinking turned off."""

    def allowed(self, thinking: bool) -> float:
        """The one value the model takes."""
        return self.thinking_on if thinking else self.thinking_off


@dataclass(frozen=True)
class ModelRules:
    """What a profile holds for the models whose name matches ``patterns``."""

    patterns: tuple[str, ...]
    thinking: Thinking = "never"
    fixed: tuple[FixedField, ...] = ()
    refused: tuple[tuple[str, str], ...] = ()
    """Fields refused outright, each with the field to use instead."""
    reasoning_shown: bool = True
    """The answer carries its reasoning as ``message.reasoning_content`` (else the
    reasoning is only counted, as OpenAI's reasoning models do)."""
    echo_reasoning: bool = False
    """With thinking on, assistant messages with tool calls must carry their
    ``reasoning_content`` when sent back."""

    def matches(self, model: str) -> bool:
        """True when ``model`` is one of these models."""
        return any(fnmatchcase(model, pattern) for pattern in self.patterns)


NO_RULES = ModelRules(patterns=("*",))


@dataclass(frozen=True)
class Profile:
    """One provider's rules and shapes."""

    name: ProviderName
    usage_format: UsageFormat
    models: tuple[ModelRules, ...] = ()
    error_shape: ErrorShape = "openai"
    fixed_message: str = "invalid {field}: only {allowed} is allowed for this model"
    """Refusal of a fixed field's other value (``{field}``, ``{allowed}``, ``{given}``)."""
    refused_message: str = (
        "Unsupported parameter: '{field}' is not supported with this model. "
        "Use '{instead}' instead."
    )
    echo_message: str = (
        "thinking is enabled but reasoning_content is missing in assistant tool call "
        "message at index {index}"
    )

    def rules_for(self, model: str) -> ModelRules:
        """The rules of ``model`` (none when no pattern matches)."""
        return next((rules for rules in self.models if rules.matches(model)), NO_RULES)


def _kimi_fixed() -> tuple[FixedField, ...]:
    return (
        FixedField("temperature", 1.0, 0.6),
        FixedField("top_p", 0.95, 0.95),
        FixedField("n", 1, 1),
        FixedField("presence_penalty", 0, 0),
        FixedField("frequency_penalty", 0, 0),
    )


MOONSHOT = Profile(
    name="moonshot",
    usage_format="moonshot",
    error_shape="moonshot",
    models=(
        ModelRules(("kimi-k2.5*", "kimi-k2.6*"), "default_on", _kimi_fixed(), echo_reasoning=True),
        ModelRules(("kimi-k2-thinking*",), "always", echo_reasoning=True),
    ),
)
OPENAI = Profile(
    name="openai",
    usage_format="openai",
    fixed_message=(
        "Unsupported value: '{field}' does not support {given} with this model. "
        "Only the default ({allowed}) value is supported."
    ),
    models=(
        ModelRules(
            ("o1*", "o3*", "o4*", "gpt-5*"),
            "always",
            fixed=(FixedField("temperature", 1, 1), FixedField("top_p", 1, 1)),
            refused=(("max_tokens", "max_completion_tokens"),),
            reasoning_shown=False,
        ),
    ),
)
DEEPSEEK = Profile(
    name="deepseek",
    usage_format="deepseek",
    echo_message="The reasoning_content in the thinking mode must be passed back to the API.",
    models=(
        ModelRules(("deepseek-reasoner*",), "always", echo_reasoning=True),
        ModelRules(("deepseek-v4*",), "default_on", echo_reasoning=True),
        ModelRules(("deepseek-v3.2*", "deepseek-chat*"), "default_off", echo_reasoning=True),
    ),
)
PROFILES: dict[str, Profile] = {
    "plain": Profile(name="plain", usage_format="plain"),
    "moonshot": MOONSHOT,
    "openai": OPENAI,
    "deepseek": DEEPSEEK,
    "anthropic-compat": Profile(name="anthropic-compat", usage_format="anthropic"),
}
"""Every profile by its ``--provider`` name."""
