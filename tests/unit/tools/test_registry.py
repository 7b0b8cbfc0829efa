from __future__ import annotations

import agent_tools
import pytest

from swarm.records import ToolCall
from swarm.tools.runner import ToolLimits, canonical, run_tool_call
from swarm.tools.toolsets import ToolsetError, load_toolset

TOOLS = load_toolset("agent_tools")
LIMITS = ToolLimits(timeout_s=5, max_output_chars=20_000)


def call(name: str, arguments: str) -> ToolCall:
    return ToolCall(id="c0", name=name, arguments=arguments)


def test_schema_from_signature_and_docstring() -> None:
    function = agent_tools.add.schema["function"]
    assert function["name"] == "add" and function["description"] == "Add two integers."
    params = function["parameters"]
    assert params["required"] == ["a"] and params["properties"]["a"]["type"] == "integer"
    assert params["properties"]["b"]["default"] == 1
    assert agent_tools.add(2, 3) == 5  # still callable as the function


def test_toolsets_by_module_and_attribute() -> None:
    assert list(TOOLS) == ["add", "shout", "explode", "slow", "flood"]
    assert list(load_toolset("agent_tools:few")) == ["add", "shout"]
    with pytest.raises(ToolsetError, match="cannot import"):
        load_toolset("no_such_pkg.tools")
    with pytest.raises(ToolsetError, match="not a @tool"):
        load_toolset("agent_tools:time")  # a module, whatever else ran before
    with pytest.raises(ToolsetError, match="no @tool functions"):
        load_toolset("agent_tools:none")
    assert load_toolset("repo") == {}  # built-in: known, loaded per node


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        ("add", '{"a": 2}', "3"),
        ("add", '{"a": 2, "b": 5}', "7"),
        ("nope", "{}", "error: unknown tool 'nope'"),
        ("add", '{"a": 2', "error: the arguments of add are not JSON"),
        ("add", "[1]", "error: the arguments of add must be a JSON object"),
        ("add", '{"a": "two"}', "error: the arguments of add do not match its schema: a:"),
        ("add", '{"a": 1, "c": 2}', "error: the arguments of add do not match its schema: c:"),
    ],
)
def test_calls_checked_against_the_schema(name: str, arguments: str, expected: str) -> None:
    outcome = run_tool_call(call(name, arguments), TOOLS, LIMITS)
    assert outcome.content.startswith(expected)
    assert outcome.invalid == outcome.error == expected.startswith("error")


def test_raising_slow_and_huge_tools_end_as_stated() -> None:
    raised = run_tool_call(call("explode", '{"why": "x"}'), TOOLS, LIMITS)
    assert raised.error and not raised.invalid
    assert raised.content == "error: explode raised RuntimeError: boom: x"
    slow = run_tool_call(call("slow", '{"seconds": 30}'), TOOLS, LIMITS)
    assert slow.error and slow.content == "error: slow timed out after 0.2 s"
    huge = run_tool_call(call("flood", '{"megabytes": 10}'), TOOLS, LIMITS)
    assert not huge.error and len(huge.content) < 1100
    assert huge.content.endswith(
        f"[... output cut: 1000 of {10 * 1024 * 1024} characters shown ...]"
    )


def test_canonical_ignores_key_order() -> None:
    assert canonical(call("add", '{"a": 1, "b": 2}')) == canonical(call("add", '{"b":2,"a":1}'))
    assert canonical(call("add", "{bad")) == "add:{bad"
