"""One tool call, as the agent loop runs it: checked, run with a timeout, output capped.

Whatever happens, the model gets a text back: the tool's output, or why there is none (a
malformed call, an unknown tool, a schema mismatch, the tool's exception, a timeout), so
it can correct itself. Nothing here raises for a tool's failure.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from swarm import tracing
from swarm.records import ToolCall
from swarm.settings_slice import SettingsSlice, setting
from swarm.store.agents import ToolOutcome
from swarm.tools.registry import Tool

log = logging.getLogger(__name__)

CUT_MARKER = "\n[... output cut: {kept} of {total} characters shown ...]"


@dataclass(frozen=True)
class ToolLimits(SettingsSlice):
    """Defaults for tools that do not set their own."""

    timeout_s: float = setting("tool_timeout_s")
    max_output_chars: int = setting("tool_max_output_chars")


@dataclass(frozen=True)
class Checked:
    """A tool call that parsed and matched its tool's schema."""

    tool: Tool
    arguments: dict[str, Any]


def canonical(call: ToolCall) -> str:
    """The call as the loop guard compares it: name and arguments (sorted keys when JSON)."""
    try:
        arguments = json.dumps(json.loads(call.arguments or "{}"), sort_keys=True)
    except ValueError:
        arguments = call.arguments
    return f"{call.name}:{arguments}"


def check(call: ToolCall, tools: Mapping[str, Tool]) -> Checked | ToolOutcome:
    """The validated call, or the outcome telling the model what is wrong with it."""
    tool = tools.get(call.name)
    if tool is None:
        known = ", ".join(sorted(tools)) or "none"
        return _invalid(f"unknown tool {call.name!r}; the tools are: {known}")
    try:
        raw = json.loads(call.arguments or "{}")
    except ValueError as exc:
        return _invalid(f"the arguments of {call.name} are not JSON ({exc}); send a JSON object")
    if not isinstance(raw, dict):
        return _invalid(f"the arguments of {call.name} must be a JSON object")
    try:
        parsed = tool.arguments.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in exc.errors()
        )
        return _invalid(f"the arguments of {call.name} do not match its schema: {problems}")
    return Checked(tool, {name: getattr(parsed, name) for name in type(parsed).model_fields})


def _invalid(text: str) -> ToolOutcome:
    return ToolOutcome(content=f"error: {text}", error=True, invalid=True)


def run_checked(checked: Checked, limits: ToolLimits) -> ToolOutcome:
    """Run a checked call in its own thread, at most its timeout; the output capped."""
    tool = checked.tool
    timeout_s = tool.timeout_s or limits.timeout_s
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = tool.fn(**checked.arguments)
        except Exception as exc:  # a tool's failure is the model's information
            box["error"] = exc

    # A daemon thread: a tool that never returns cannot be killed, but it holds no node.
    thread = threading.Thread(target=target, name=f"tool-{tool.name}", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        log.debug("tool %s timed out after %.1f s", tool.name, timeout_s)
        return ToolOutcome(
            content=f"error: {tool.name} timed out after {timeout_s:g} s", error=True
        )
    if "error" in box:
        exc = box["error"]
        log.debug("tool %s raised %s", tool.name, type(exc).__name__)
        return ToolOutcome(
            content=f"error: {tool.name} raised {type(exc).__name__}: {exc}", error=True
        )
    return ToolOutcome(
        content=cap(_text(box.get("value")), tool.max_output_chars or limits.max_output_chars)
    )


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def cap(text: str, max_chars: int) -> str:
    """``text`` cut to ``max_chars`` characters with a marker saying how much was kept."""
    if len(text) <= max_chars:
        return text
    return text[:max_chars] + CUT_MARKER.format(kept=max_chars, total=len(text))


def run_tool_call(call: ToolCall, tools: Mapping[str, Tool], limits: ToolLimits) -> ToolOutcome:
    """Check and run one call (in an ``execute_tool <name>`` span when tracing)."""
    with tracing.tool(call.name, call.id) as span:
        checked = check(call, tools)
        outcome = checked if isinstance(checked, ToolOutcome) else run_checked(checked, limits)
        tracing.tool_ended(span, outcome.error, outcome.invalid)
        return outcome
