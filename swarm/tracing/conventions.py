"""Attribute names and values of swarm's spans: the OpenTelemetry GenAI semantic conventions
(``gen_ai.*``), the OpenInference names Arize Phoenix reads (``openinference.*``,
``llm.*``), Langfuse's observation type, and swarm's own (``swarm.*``).

Pure functions of swarm's records, with no OpenTelemetry import: the same values are
written under each convention's names, so a viewer of either shows the same numbers.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from swarm.catalog import Catalog, ModelSpec
from swarm.records import Usage

AttributeValue = str | bool | int | float | Sequence[str]
Attributes = dict[str, AttributeValue]

CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""Prompts and answers are put on attempt spans only when this variable is ``true``."""

AGENT_NAME = "sub-agent"
"""``gen_ai.agent.name`` of a node's span (``invoke_agent sub-agent``)."""

OTHER_PROVIDER = "_OTHER"
"""``gen_ai.provider.name`` of a backend the convention names no provider for."""

_PROVIDER_HINTS: tuple[tuple[str, str], ...] = (
    ("moonshot", "moonshot_ai"),
    ("kimi", "moonshot_ai"),
    ("deepseek", "deepseek"),
    ("openai", "openai"),
    ("gpt-", "openai"),
    ("anthropic", "anthropic"),
    ("claude", "anthropic"),
    ("gemini", "gcp.gemini"),
    ("mistral", "mistral_ai"),
    ("groq", "groq"),
    ("x.ai", "x_ai"),
    ("grok", "x_ai"),
)
"""Substrings of a backend's host or a model's gateway name, and the provider they mean
(the convention's well-known ``gen_ai.provider.name`` values). The host is read first: a
model served through a proxy is that proxy's call."""


_CATALOG_PROVIDERS = {"moonshot": "moonshot_ai", "openai": "openai", "deepseek": "deepseek"}
"""The catalog's ``provider`` names (swarm.providers) as the convention spells them;
``plain`` says nothing of who serves the model, so the host and name are read instead."""


def provider_name(catalog: Catalog, model: ModelSpec) -> str:
    """``gen_ai.provider.name`` of a model: the catalog's ``provider`` (of the model, else
    of its backend) when it names one, else guessed from the backend's host, then from the
    model's gateway name; ``_OTHER`` when nothing matches."""
    backend = catalog.backend_of(model)
    for declared in (getattr(model, "provider", None), getattr(backend, "provider", None)):
        if isinstance(declared, str) and declared in _CATALOG_PROVIDERS:
            return _CATALOG_PROVIDERS[declared]
    host = urlsplit(backend.base_url).hostname or "" if backend.base_url else ""
    for text in (host.lower(), model.gateway_name.lower()):
        for hint, provider in _PROVIDER_HINTS:
            if text and hint in text:
                return provider
    return OTHER_PROVIDER


def server_address(base_url: str | None) -> str | None:
    """``server.address``: the host of the URL a call is sent to (never its path or key)."""
    if not base_url:
        return None
    return urlsplit(base_url).hostname


def request_attributes(
    model: ModelSpec, provider: str, max_tokens: int, server: str | None
) -> Attributes:
    """The attributes an attempt span starts with."""
    attributes: Attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider,
        "gen_ai.request.model": model.gateway_name,
        "gen_ai.request.max_tokens": max_tokens,
        "langfuse.observation.type": "generation",
        "openinference.span.kind": "LLM",
        "llm.model_name": model.gateway_name,
        "llm.provider": provider,
        "swarm.model": model.name,
    }
    if server:
        attributes["server.address"] = server
    return attributes


def usage_attributes(usage: Usage) -> Attributes:
    """Billed tokens under both conventions' names (cache reads and reasoning tokens are
    parts of the input and output counts, as every provider swarm reads reports them)."""
    reasoning = int(getattr(usage, "reasoning_tokens", 0) or 0)
    return {
        "gen_ai.usage.input_tokens": usage.prompt_tokens,
        "gen_ai.usage.output_tokens": usage.completion_tokens,
        "gen_ai.usage.cache_read.input_tokens": usage.cached_tokens,
        "gen_ai.usage.reasoning.output_tokens": reasoning,
        "llm.token_count.prompt": usage.prompt_tokens,
        "llm.token_count.completion": usage.completion_tokens,
        "llm.token_count.total": usage.total_tokens,
        "llm.token_count.prompt_details.cache_read": usage.cached_tokens,
        "llm.token_count.completion_details.reasoning": reasoning,
    }


def response_attributes(
    model: str | None, response_id: str | None, finish_reason: str | None
) -> Attributes:
    """What the gateway said of its answer."""
    attributes: Attributes = {}
    if model:
        attributes["gen_ai.response.model"] = model
    if response_id:
        attributes["gen_ai.response.id"] = response_id
    if finish_reason:
        attributes["gen_ai.response.finish_reasons"] = (finish_reason,)
    return attributes


def input_messages(messages: Sequence[Mapping[str, Any]]) -> Attributes:
    """The prompt (only when content capture is on): the convention's
    ``gen_ai.input.messages`` and OpenInference's ``input.value``, as JSON."""
    parts = [
        {"role": str(m.get("role", "")), "parts": [{"type": "text", "content": _text(m)}]}
        for m in messages
    ]
    text = json.dumps(parts, ensure_ascii=False)
    return {"gen_ai.input.messages": text, "input.value": text,
            "input.mime_type": "application/json"}  # fmt: skip


def output_messages(content: str, finish_reason: str | None) -> Attributes:
    """The answer (only when content capture is on)."""
    message = {"role": "assistant", "parts": [{"type": "text", "content": content}],
               "finish_reason": finish_reason or ""}  # fmt: skip
    return {"gen_ai.output.messages": json.dumps([message], ensure_ascii=False),
            "output.value": content}  # fmt: skip


def _text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
