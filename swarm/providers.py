"""What each provider documents about a chat completion's body: a small table of rules.

A model's request fields are catalog data (swarm.catalog.ModelSpec: ``sampling``,
``thinking``, ``thinking_by_kind``, ``reasoning``, ``max_tokens_field``,
``echo_reasoning``, ``extra_body``); its ``provider`` (or its backend's) names the row of
``PROVIDERS`` that gives the defaults of the fields a model leaves out, and the rules the
catalog's validation holds a model to (``problems``). No rule here names a model: a rule
reads the model's own fields (docs/providers.md gives the source of each row).

    plain       any OpenAI-compatible server (the default): ``temperature`` 0.2 and
                ``max_tokens``, as swarm always sent; nothing else refused
    moonshot    Moonshot's API (Kimi): no sampling field sent; a model with the
                ``thinking`` switch (kimi-k2.5) has fixed sampling values (temperature
                1.0 thinking, 0.6 not; top_p 0.95; n 1; penalties 0), any other is a 400;
                an assistant tool-call message is sent back with its reasoning_content
    openai      OpenAI's API: a reasoning model (``reasoning = true``) takes
                ``max_completion_tokens`` (``max_tokens`` is a 400) and no temperature
                but the default 1; no ``thinking`` field
    deepseek    DeepSeek's API: thinking mode ignores the sampling fields (none sent); an
                assistant tool-call message is sent back with its reasoning_content
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

ProviderName = Literal["plain", "moonshot", "openai", "deepseek"]
"""A row of ``PROVIDERS``."""
Thinking = Literal["enabled", "disabled"]
"""The ``thinking`` switch of Moonshot's and DeepSeek's thinking models
(``{"thinking": {"type": ...}}`` in the body)."""
CapField = Literal["max_tokens", "max_completion_tokens"]
"""The body field carrying the completion budget."""

SAMPLING_FIELDS = ("temperature", "top_p", "n", "presence_penalty", "frequency_penalty")
"""The sampling fields providers document rules for."""
SWARM_FIELDS = frozenset(
    {
        "model",
        "messages",
        "max_tokens",
        "max_completion_tokens",
        "tools",
        "tool_choice",
        "response_format",
        "stream",
        "thinking",
    }
)
"""Body fields swarm sets itself: never taken from ``sampling`` or ``extra_body``."""
LEGACY_TEMPERATURE = 0.2
"""The temperature every request carried before request fields were catalog data; the
``plain`` provider keeps sending it."""


@dataclass(frozen=True)
class ProviderRules:
    """One provider's documented rules for a chat completion's body."""

    name: str
    sampling: Mapping[str, float]
    """Sampling fields sent when the model's ``sampling`` is not given."""
    reasoning_sampling: Mapping[str, float] = field(default_factory=dict)
    """Sampling fields sent by default to a reasoning model (``reasoning = true``)."""
    fixed_sampling: Mapping[str, float] = field(default_factory=dict)
    """Values a model with the ``thinking`` switch must keep, where sent (temperature
    apart: ``fixed_temperature``); another value is refused by the provider."""
    fixed_temperature: Mapping[Thinking, float] = field(default_factory=dict)
    """The only temperature such a model takes, by its thinking state."""
    reasoning_temperature: float | None = None
    """The only temperature a reasoning model takes (None: any)."""
    reasoning_cap_field: CapField = "max_tokens"
    """The completion cap's field on a reasoning model."""
    reasoning_refused: frozenset[str] = frozenset()
    """Body fields the provider refuses on a reasoning model."""
    takes_thinking: bool = True
    """The provider takes the ``thinking`` field (else sending it is a 400)."""
    echo_reasoning: bool = False
    """An assistant tool-call message is sent back with its ``reasoning_content`` (the
    provider refuses the next step without it when thinking)."""


PROVIDERS: Mapping[str, ProviderRules] = {
    "plain": ProviderRules("plain", sampling={"temperature": LEGACY_TEMPERATURE}),
    "moonshot": ProviderRules(
        "moonshot",
        sampling={},
        fixed_sampling={"top_p": 0.95, "n": 1, "presence_penalty": 0.0, "frequency_penalty": 0.0},
        fixed_temperature={"enabled": 1.0, "disabled": 0.6},
        echo_reasoning=True,
    ),
    "openai": ProviderRules(
        "openai",
        sampling={"temperature": LEGACY_TEMPERATURE},
        reasoning_sampling={},
        reasoning_temperature=1.0,
        reasoning_cap_field="max_completion_tokens",
        reasoning_refused=frozenset({"max_tokens"}),
        takes_thinking=False,
    ),
    "deepseek": ProviderRules("deepseek", sampling={}, echo_reasoning=True),
}
"""The documented rules of each provider (docs/providers.md cites each)."""


@dataclass(frozen=True)
class ModelFields:
    """A model's request fields as its catalog table gives them (None: the provider's)."""

    provider: str = "plain"
    sampling: Mapping[str, float] | None = None
    thinking: Thinking | None = None
    thinking_by_kind: Mapping[str, Thinking] = field(default_factory=dict)
    reasoning: bool | None = None
    max_tokens_field: CapField | None = None
    echo_reasoning: bool | None = None
    extra_body: Mapping[str, Any] = field(default_factory=dict)

    @property
    def rules(self) -> ProviderRules:
        return PROVIDERS[self.provider]

    @property
    def is_reasoning(self) -> bool:
        """The model always reasons inside its cap (an OpenAI reasoning model)."""
        return bool(self.reasoning)

    def thinking_for(self, kind: str) -> Thinking | None:
        """The thinking switch sent for a call of ``kind`` (None: not sent)."""
        return self.thinking_by_kind.get(kind, self.thinking)


@dataclass(frozen=True)
class RequestShape:
    """What a model's calls of one kind send beside the messages, resolved once."""

    fields: Mapping[str, Any]
    """Body fields: sampling, ``thinking``, the catalog's ``extra_body``."""
    cap_field: CapField
    """``max_tokens`` or ``max_completion_tokens``."""
    echo_reasoning: bool
    """Assistant tool-call messages are sent back with their reasoning_content."""
    thinks: bool
    """The answer's reasoning is generated inside the completion cap (thinking on, or a
    reasoning model): a small cap can leave the content empty."""


def shape_of(model: ModelFields, kind: str) -> RequestShape:
    """The body fields of ``model``'s calls of ``kind``."""
    rules = model.rules
    thinking = model.thinking_for(kind)
    sampling = model.sampling
    if sampling is None:
        sampling = rules.reasoning_sampling if model.is_reasoning else rules.sampling
    fields: dict[str, Any] = dict(sampling)
    if thinking is not None:
        fields["thinking"] = {"type": thinking}
    fields.update(model.extra_body)
    cap = model.max_tokens_field or (
        rules.reasoning_cap_field if model.is_reasoning else "max_tokens"
    )
    echo = rules.echo_reasoning if model.echo_reasoning is None else model.echo_reasoning
    thinks = model.is_reasoning or thinking == "enabled"
    return RequestShape(fields, cap, echo, thinks)


def problems(model: ModelFields, kinds: frozenset[str]) -> list[str]:
    """What the provider documents as refused in ``model``'s fields (empty: none), each
    as ``<field>: <why>``; ``kinds`` are the catalog's routing kinds."""
    rules = model.rules
    found = [f"{name}: swarm sets this field itself" for name in _own_fields(model)]
    found += [
        f"thinking_by_kind: unknown kind {k!r}" for k in model.thinking_by_kind if k not in kinds
    ]
    if not rules.takes_thinking and (model.thinking or model.thinking_by_kind):
        found.append(f"thinking: the {rules.name} provider takes no thinking field (a 400)")
    if model.thinking is not None or model.thinking_by_kind:
        found += _fixed_problems(model)
    if model.is_reasoning:
        found += _reasoning_problems(model)
    return found


def _own_fields(model: ModelFields) -> list[str]:
    names = [f"sampling.{n}" for n in model.sampling or () if n in SWARM_FIELDS]
    return names + [f"extra_body.{n}" for n in model.extra_body if n in SWARM_FIELDS]


def _fixed_problems(model: ModelFields) -> list[str]:
    """A switchable thinking model's sampling values against the provider's fixed ones."""
    rules, sampling = model.rules, model.sampling or {}
    found = [
        f"sampling.{name}: {rules.name} fixes it at {fixed:g} on thinking models; {value:g} "
        "is refused (leave it out)"
        for name, fixed in rules.fixed_sampling.items()
        if (value := sampling.get(name)) is not None and value != fixed
    ]
    temperature = sampling.get("temperature")
    if temperature is not None and rules.fixed_temperature:
        states = {model.thinking or "enabled", *model.thinking_by_kind.values()}
        allowed = {rules.fixed_temperature[s] for s in states}
        if allowed != {temperature}:
            shown = " or ".join(f"{t:g}" for t in sorted(allowed))
            found.append(
                f"sampling.temperature: {rules.name} takes only {shown} here "
                f"(by thinking state); {temperature:g} is refused (leave it out)"
            )
    return found


def _reasoning_problems(model: ModelFields) -> list[str]:
    rules = model.rules
    found = []
    cap = model.max_tokens_field or rules.reasoning_cap_field
    if cap in rules.reasoning_refused:
        found.append(
            f"max_tokens_field: {rules.name} refuses {cap} on a reasoning model "
            f"(use {rules.reasoning_cap_field!r})"
        )
    temperature = (model.sampling or {}).get("temperature")
    fixed = rules.reasoning_temperature
    if temperature is not None and fixed is not None and temperature != fixed:
        found.append(
            f"sampling.temperature: {rules.name} takes only {fixed:g} on a reasoning "
            f"model; {temperature:g} is refused (leave it out)"
        )
    return found


def inherit_providers(data: dict[str, Any], default_backend: str) -> dict[str, Any]:
    """The catalog's TOML data with each model table that names no ``provider`` given its
    backend's (when the backend's table names one)."""
    backends, models = data.get("backends"), data.get("models")
    if not isinstance(backends, dict) or not isinstance(models, dict):
        return data
    named = {}
    for name, spec in models.items():
        backend = (
            backends.get(spec.get("backend", default_backend)) if isinstance(spec, dict) else None
        )
        provider = backend.get("provider") if isinstance(backend, dict) else None
        if isinstance(spec, dict) and "provider" not in spec and provider is not None:
            spec = {**spec, "provider": provider}
        named[name] = spec
    return {**data, "models": named}
