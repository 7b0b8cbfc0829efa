"""What the simulator answers: request parsing, deterministic content, prompt caching.

Everything here is a pure function of the request (plus the prefix cache's memory), so the
same request always gets the same content and token counts.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import re
import time
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from swarm.sim.schema_fill import instance_of, schema_in
from swarm.sim.tokenizer import CHARS_PER_TOKEN, count_messages
from swarm.sim.tools import results_digest, tool_calls

COMPLETION_MIN_TOKENS = 40
COMPLETION_MAX_TOKENS = 240
"""Natural completion lengths lie in [COMPLETION_MIN_TOKENS, COMPLETION_MAX_TOKENS]."""

_SYLLABLES = (
    "ka", "lo", "mi", "ren", "tu", "sa", "vor", "el", "qui", "dan",
    "po", "zen", "ar", "bi", "nu", "sol", "fe", "gra", "ti", "mo",
)  # fmt: skip


class RequestError(Exception):
    """The request cannot be served; answered 400 with an OpenAI-style error body."""

    def __init__(
        self, message: str, param: str | None = None, code: str = "invalid_request"
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code


@dataclass(frozen=True)
class ChatRequest:
    """The parts of a chat completion request the simulator uses."""

    model: str
    roles: tuple[str, ...]
    contents: tuple[str, ...]
    message_tokens: tuple[int, ...]
    """Estimated tokens of each message (``count_messages`` of that message alone)."""
    max_tokens: int | None
    json_mode: bool
    json_schema: dict[str, Any] | None = None
    """Schema the answer must follow (JSON mode only), see swarm.sim.schema_fill."""
    tools: tuple[dict[str, Any], ...] = ()
    """Tools offered (then the answer may be tool calls, see swarm.sim.tools)."""
    tool_steps: int = 0
    """Assistant messages with tool calls already in the conversation."""
    tool_results: tuple[str, ...] = ()
    """Contents of the ``tool`` messages, in order."""
    thinking: bool = False
    """The model thinks before it answers (set by the provider profile, swarm.sim.rules)."""

    @property
    def last_user_content(self) -> str:
        """Content of the last ``user`` message ("" if there is none)."""
        for role, content in zip(reversed(self.roles), reversed(self.contents), strict=True):
            if role == "user":
                return content
        return ""


def message_text(content: object) -> str:
    """Text of a message ``content``: a string, a list of parts, or null."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict)]
        return "".join(p for p in parts if isinstance(p, str))
    return ""


def _parse_messages(raw: object) -> tuple[tuple[str, ...], tuple[str, ...]]:
    if not isinstance(raw, list) or not raw:
        raise RequestError("'messages' must be a non-empty array", param="messages")
    roles: list[str] = []
    contents: list[str] = []
    for index, message in enumerate(raw):
        role = message.get("role") if isinstance(message, dict) else None
        if not isinstance(role, str) or not role:
            raise RequestError(f"messages[{index}] needs a string 'role'", param="messages")
        roles.append(role)
        contents.append(message_text(message.get("content")) + _calls_text(message))
    return tuple(roles), tuple(contents)


def _calls_text(message: dict[str, Any]) -> str:
    """The tool calls of an assistant message as text (they are prompt tokens too)."""
    calls = message.get("tool_calls")
    if not isinstance(calls, list):
        return ""
    parts = [json.dumps(c.get("function"), sort_keys=True) for c in calls if isinstance(c, dict)]
    return "\n" + "\n".join(parts)


def _tools(body: dict[str, Any]) -> tuple[dict[str, Any], ...]:
    tools = body.get("tools")
    if tools is None:
        return ()
    if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
        raise RequestError("'tools' must be an array of objects", param="tools")
    return tuple(tools)


def _parse_max_tokens(body: dict[str, Any]) -> int | None:
    caps: list[int] = []
    for key in ("max_tokens", "max_completion_tokens"):
        value = body.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise RequestError(f"'{key}' must be a positive integer", param=key)
        caps.append(value)
    return min(caps) if caps else None


def _json_mode(body: dict[str, Any]) -> bool:
    fmt = body.get("response_format")
    return isinstance(fmt, dict) and fmt.get("type") in ("json_object", "json_schema")


def parse_chat_request(body: object) -> ChatRequest:
    """Validate a decoded JSON body; raises RequestError for what a gateway would reject."""
    if not isinstance(body, dict):
        raise RequestError("the request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise RequestError("'model' must be a non-empty string", param="model")
    if body.get("stream"):
        raise RequestError(
            "stream=true is not supported by the simulator", param="stream", code="unsupported"
        )
    roles, contents = _parse_messages(body.get("messages"))
    json_mode = _json_mode(body)
    system = "\n".join(c for r, c in zip(roles, contents, strict=True) if r == "system")
    return ChatRequest(
        model=model,
        roles=roles,
        contents=contents,
        message_tokens=tuple(count_messages([content]) for content in contents),
        max_tokens=_parse_max_tokens(body),
        json_mode=json_mode,
        json_schema=schema_in(body, system) if json_mode else None,
        tools=_tools(body),
        tool_steps=sum(1 for m in body["messages"] if isinstance(m, dict) and m.get("tool_calls")),
        tool_results=tuple(c for r, c in zip(roles, contents, strict=True) if r == "tool"),
    )


def request_digest(model: str, contents: Sequence[str]) -> str:
    """Hex sha256 over the model and all message contents (NUL-separated)."""
    digest = hashlib.sha256(model.encode())
    for content in contents:
        digest.update(b"\0")
        digest.update(content.encode())
    return digest.hexdigest()


def natural_completion_tokens(digest: str) -> int:
    """Completion length before any max_tokens cap, in the natural range."""
    span = COMPLETION_MAX_TOKENS - COMPLETION_MIN_TOKENS + 1
    return COMPLETION_MIN_TOKENS + int(digest[12:20], 16) % span


def pseudo_words(digest: str, chars: int) -> str:
    """Deterministic pseudo-words from ``digest``, about ``chars`` characters long."""
    rng = random.Random(digest)
    words: list[str] = []
    length = 0
    while length < chars:
        word = "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 3)))
        words.append(word)
        length += len(word) + 1
    return " ".join(words)


@dataclass(frozen=True)
class Completion:
    """The assistant answer to one request."""

    content: str
    completion_tokens: int
    finish_reason: str
    tool_calls: tuple[dict[str, Any], ...] = ()
    """Tool calls of the answer (then ``content`` is null in the body)."""
    reasoning_content: str | None = None
    """The reasoning a thinking model shows (swarm.sim.reasoning); None: not shown."""
    reasoning_tokens: int = 0
    """Of ``completion_tokens``, the reasoning's."""


REPLY_RE = re.compile(r"\[\[sim:reply_b64=([A-Za-z0-9+/=_-]+)\]\]")


def scripted_reply(text: str) -> str | None:
    """The answer a ``[[sim:reply_b64=...]]`` marker scripts (base64 of UTF-8 text)."""
    match = REPLY_RE.search(text)
    if match is None:
        return None
    try:
        return base64.urlsafe_b64decode(match.group(1)).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return None


def make_completion(
    request: ChatRequest, malformed_rate: float = 0.0, answer_tokens: int | None = None
) -> Completion:
    """Deterministic answer: ``sim:<model>:<digest12> results=N`` then pseudo-words.

    Its length is ``answer_tokens`` (``[[sim:answer_tokens=N]]``) or else the natural one,
    cut at the request's max_tokens (then ``finish_reason`` is ``length``). The text is
    about as long as ``completion_tokens`` (header always included). In JSON mode the
    content is a JSON object, complete even when the length is capped.
    """
    digest = request_digest(request.model, request.contents)
    if request.tools:
        calls = tool_calls(
            request.last_user_content, request.tools, request.tool_steps, digest, malformed_rate
        )
        if calls:
            tokens = 8 + sum(len(json.dumps(c)) for c in calls) // 4
            return Completion("", tokens, "tool_calls", tuple(calls))
    natural = answer_tokens if answer_tokens is not None else natural_completion_tokens(digest)
    cap = request.max_tokens
    tokens = natural if cap is None else min(natural, cap)
    finish = "length" if cap is not None and natural > cap else "stop"
    results = request.last_user_content.count("<result ")
    header = f"sim:{request.model}:{digest[:12]}"
    words = pseudo_words(digest, max(0, int(tokens * CHARS_PER_TOKEN) - len(header) - 12))
    scripted = scripted_reply(request.last_user_content)
    if scripted is not None:
        content = scripted
    elif request.json_schema is not None:
        content = json.dumps(instance_of(request.json_schema, int(digest[:8], 16)))
    elif request.json_mode:
        payload = {"model": request.model, "digest": digest[:12], "results": results}
        content = json.dumps({**payload, "summary": f"{header} {words}"})
    elif request.tool_results:
        seen = results_digest(request.tool_results)
        content = f"{header} tool_results={len(request.tool_results)}\n{seen}\n{words}"
    else:
        content = f"{header} results={results} {words}"
    return Completion(content=content, completion_tokens=tokens, finish_reason=finish)


def prompt_tokens(request: ChatRequest) -> int:
    """Estimated prompt tokens: ``count_messages`` over all message contents."""
    return sum(request.message_tokens)


def prefixes(request: ChatRequest, min_tokens: int) -> list[tuple[bytes, int]]:
    """The request's cacheable prefixes, shortest first: (a key of the model and the leading
    messages, their estimated tokens) for each run of whole leading messages of at least
    ``min_tokens``."""
    chain = hashlib.sha256(request.model.encode())
    total = 0
    out: list[tuple[bytes, int]] = []
    messages = zip(request.roles, request.contents, request.message_tokens, strict=True)
    for role, content, tokens in messages:
        chain.update(b"\0" + role.encode() + b"\0" + content.encode())
        total += tokens
        if total >= min_tokens:
            out.append((chain.copy().digest(), total))
    return out


class PrefixCache:
    """Message prefixes already seen, per model, for ``cached_tokens``.

    A prefix is a run of whole leading messages (role and content). Only prefixes of at
    least ``min_tokens`` estimated tokens are remembered and reported, like real gateways
    that cache from 1024 tokens on. The ``max_entries`` least recently used survive.
    """

    def __init__(self, min_tokens: int, max_entries: int) -> None:
        self.min_tokens = min_tokens
        self.max_entries = max_entries
        self._seen: OrderedDict[bytes, None] = OrderedDict()

    def lookup_and_store(self, request: ChatRequest) -> int:
        """Tokens of the longest prefix seen before; then remember all of its prefixes."""
        cached = 0
        for key, tokens in prefixes(request, self.min_tokens):
            if key in self._seen:
                cached = tokens
                self._seen.move_to_end(key)
            else:
                self._seen[key] = None
        while len(self._seen) > self.max_entries:
            self._seen.popitem(last=False)
        return cached


def completion_body(
    request: ChatRequest, completion: Completion, usage: dict[str, Any] | None, empty: bool
) -> dict[str, Any]:
    """The JSON body of a chat.completion answer (``usage`` omitted when None)."""
    message: dict[str, Any] = {"role": "assistant", "content": completion.content}
    if completion.tool_calls:
        message = {"role": "assistant", "content": None, "tool_calls": list(completion.tool_calls)}
    if completion.reasoning_content is not None:
        message["reasoning_content"] = completion.reasoning_content
    choice = {"index": 0, "message": message, "finish_reason": completion.finish_reason}
    body: dict[str, Any] = {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.model,
        "choices": [] if empty else [choice],
    }
    if usage is not None:
        body["usage"] = usage
    return body
