from __future__ import annotations

import base64
import json

from swarm.sim.content import make_completion, parse_chat_request
from swarm.sim.tools import tool_calls

TOOLS = (
    {"type": "function", "function": {"name": "grep", "parameters": {
        "type": "object", "properties": {"pattern": {"type": "string"}}, "required": ["pattern"]}}},
    {"type": "function", "function": {"name": "read_file", "parameters": {
        "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}},
)  # fmt: skip


def names_args(calls: list[dict]) -> list[tuple[str, str]]:
    return [(c["function"]["name"], c["function"]["arguments"]) for c in calls]


def test_read_marker_opens_files_at_once_then_answers() -> None:
    text = "diff [[sim:read=src/a.py, b.py]]"
    assert names_args(tool_calls(text, TOOLS, 0, "d", 0.0)) == [
        ("read_file", '{"path": "src/a.py"}'), ("read_file", '{"path": "b.py"}')
    ]  # fmt: skip
    assert tool_calls(text, TOOLS, 1, "d", 0.0) == []


def test_steps_loop_script_and_default() -> None:
    three = [tool_calls("[[sim:tool_steps=3]]", TOOLS, k, "d", 0.0) for k in range(4)]
    assert [names_args(c) for c in three] == [
        [("grep", '{"pattern": "pattern-0"}')], [("grep", '{"pattern": "pattern-1"}')],
        [("grep", '{"pattern": "pattern-2"}')], [],
    ]  # fmt: skip
    loop = {str(names_args(tool_calls("[[sim:tool_loop]]", TOOLS, k, "d", 0.0))) for k in range(9)}
    assert len(loop) == 1
    script = [[{"name": "read_file", "arguments": "{not json"}]]
    b64 = base64.urlsafe_b64encode(json.dumps(script).encode()).decode()
    assert names_args(tool_calls(f"[[sim:tools_b64={b64}]]", TOOLS, 0, "d", 0.0)) == [
        ("read_file", "{not json")
    ]
    assert names_args(tool_calls("plain", TOOLS, 0, "d", 0.0)) == [
        ("grep", '{"pattern": "pattern-0"}')
    ]
    assert tool_calls("plain", TOOLS, 1, "d", 0.0) == []


def test_malformed_rate_is_deterministic() -> None:
    bad = [tool_calls("[[sim:tool_steps=50]]", TOOLS, k, "d", 0.3) for k in range(50)]
    broken = [c for calls in bad for c in calls if not c["function"]["arguments"].endswith("}")]
    assert 5 <= len(broken) <= 25
    assert bad == [tool_calls("[[sim:tool_steps=50]]", TOOLS, k, "d", 0.3) for k in range(50)]


def test_completion_carries_tool_calls_and_the_answer_quotes_results() -> None:
    body = {"model": "m", "tools": list(TOOLS),
            "messages": [{"role": "user", "content": "x [[sim:read=a.py]]"}]}  # fmt: skip
    first = make_completion(parse_chat_request(body))
    assert first.finish_reason == "tool_calls" and len(first.tool_calls) == 1
    body["messages"] += [
        {"role": "assistant", "content": None, "tool_calls": list(first.tool_calls)},
        {"role": "tool", "tool_call_id": "call_0_0", "content": "a.py lines 1-1 of 1\n1 BUG here"},
    ]
    final = make_completion(parse_chat_request(body))
    assert (
        not final.tool_calls and "BUG here" in final.content and "tool_results=1" in final.content
    )
