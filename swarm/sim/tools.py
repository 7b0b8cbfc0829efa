"""Scripted tool calls: how the simulator answers a request that offers ``tools``.

The simulator keeps no state between requests: the step it is at is the number of
assistant messages with tool calls already in the conversation. What it calls comes from
markers in the last user message (the node's input):

    [[sim:read=a.py,b.py]]   one step opening these files at once (the first tool whose name
                             starts with "read", its first required string parameter), then
                             the answer
    [[sim:tool_steps=N]]     N steps, each calling the first tool with arguments of step k
    [[sim:tool_loop]]        the same call (first tool, step 0's arguments) at every step
    [[sim:tools_b64=B]]      B: URL-safe base64 of a JSON list of steps, each a list of
                             {"name": ..., "arguments": object or raw text}
    (no marker)              one step calling the first tool, then the answer

With ``tool_malformed_rate``, that share of calls (decided by a hash of the request, so a
repeat gets the same) carries arguments that are not JSON.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from typing import Any

TOOL_MARKER_RE = re.compile(r"\[\[sim:(read|tools_b64|tool_steps|tool_loop)(?:=([^\]]*))?\]\]")
LOOP = -1
Step = list[tuple[str, Any]]


def _functions(tools: tuple[dict[str, Any], ...]) -> list[dict[str, Any]]:
    return [t["function"] for t in tools if isinstance(t.get("function"), dict)]


def arguments_for(function: dict[str, Any], k: int) -> dict[str, Any]:
    """Arguments of step ``k`` for a function: its required parameters, by type."""
    params = function.get("parameters") or {}
    props: dict[str, Any] = params.get("properties") or {}
    values: dict[str, Any] = {}
    for name in params.get("required") or []:
        kind = (props.get(name) or {}).get("type")
        if kind == "integer":
            values[name] = k + 1
        elif kind == "number":
            values[name] = k + 1.5
        elif kind == "boolean":
            values[name] = k % 2 == 0
        else:
            values[name] = f"{name}-{k}"
    return values


def _read_step(functions: list[dict[str, Any]], paths: str) -> Step:
    reader = next((f for f in functions if str(f.get("name", "")).startswith("read")), functions[0])
    required = (reader.get("parameters") or {}).get("required") or ["path"]
    return [(reader["name"], {required[0]: p.strip()}) for p in paths.split(",") if p.strip()]


def _decoded(value: str) -> list[Step]:
    try:
        steps = json.loads(base64.urlsafe_b64decode(value).decode("utf-8"))
        return [[(c["name"], c.get("arguments", {})) for c in step] for step in steps]
    except (ValueError, KeyError, TypeError):
        return []


def script(text: str, tools: tuple[dict[str, Any], ...]) -> list[Step] | int:
    """The steps the markers in ``text`` script, or LOOP for a call repeated forever."""
    functions = _functions(tools)
    if not functions:
        return []
    first = functions[0]
    match = TOOL_MARKER_RE.search(text)
    name, value = (match.group(1), match.group(2) or "") if match else ("", "")
    if name == "tool_loop":
        return LOOP
    if name == "read":
        return [_read_step(functions, value)]
    if name == "tools_b64":
        return _decoded(value)
    count = int(value) if name == "tool_steps" and value.isdigit() else 1
    return [[(first["name"], arguments_for(first, k))] for k in range(count)]


def tool_calls(
    text: str, tools: tuple[dict[str, Any], ...], step: int, digest: str, malformed_rate: float
) -> list[dict[str, Any]]:
    """The tool calls of the answer at ``step`` (empty: answer with text)."""
    steps = script(text, tools)
    if steps == LOOP:
        first = _functions(tools)[0]
        calls: Step = [(first["name"], arguments_for(first, 0))]
    elif isinstance(steps, list) and step < len(steps):
        calls = steps[step]
    else:
        return []
    out = []
    for index, (name, arguments) in enumerate(calls):
        raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
        if _malformed(digest, step, index, malformed_rate):
            raw = raw[: max(len(raw) - 2, 1)]  # cut before the closing brace: not JSON
        function = {"name": name, "arguments": raw}
        out.append({"id": f"call_{step}_{index}", "type": "function", "function": function})
    return out


def _malformed(digest: str, step: int, index: int, rate: float) -> bool:
    if rate <= 0:
        return False
    draw = hashlib.sha256(f"{digest}:{step}:{index}".encode()).hexdigest()[:8]
    return int(draw, 16) / 0x1_0000_0000 < rate


def results_digest(results: tuple[str, ...], chars: int = 160) -> str:
    """What the final answer says it saw: the start of each tool result."""
    lines = []
    for result in results:
        shown = " | ".join(line.strip() for line in result.splitlines()[:3])
        lines.append(f"- {shown[:chars]}")
    return "\n".join(lines)
