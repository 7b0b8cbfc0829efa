"""Agent nodes over real processes: redis-server, two `celery -A workers worker` processes
and `swarm sim` answering tool calls as scripted by markers in each input."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from faults import FAST_RECOVERY, FaultStack, fault_stack, task_lines, wait_until

from swarm.client import SwarmHandle
from swarm.jobs.review import REVIEW_INSTRUCTION, REVIEW_SCHEMA
from swarm.records import InputItem
from swarm.sources.git import commit_inputs

UNIT = Path(__file__).resolve().parents[1] / "unit"
sys.path[:0] = [str(UNIT), str(UNIT / "tools")]
from gitrepo import make_repo  # noqa: E402  (the unit tests' folder, put on sys.path above)

pytestmark = pytest.mark.integration

ENV = {
    **FAST_RECOVERY,
    # A node of several steps runs longer than one call: keep it inside the visibility
    # timeout so only a killed worker's node is delivered again.
    "SWARM_VISIBILITY_TIMEOUT_S": "12",
    "SWARM_NODES_PER_TASK": "1",
    "PYTHONPATH": str(UNIT),  # the workers import the unit tests' toolset
}


@pytest.fixture(scope="module")
def fs(redis_server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultStack]:  # type: ignore[no-untyped-def]
    logs = tmp_path_factory.mktemp("agents")
    with fault_stack(redis_server, logs, ["--latency-ms", "100", "--seed", "3"], ENV) as stack:
        stack.ensure_workers(["a1", "a2"], 4)
        yield stack


def b64(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return base64.urlsafe_b64encode(text.encode()).decode()


def script(*steps: list[tuple[str, Any]]) -> str:
    data = [[{"name": n, "arguments": a} for n, a in step] for step in steps]
    return f"[[sim:tools_b64={b64(data)}]]"


def billed_as_served(fs: FaultStack, report: dict[str, Any]) -> None:
    """The ledger equals what the simulator served (every step billed once)."""
    stats = fs.stack.stats()
    calls = sum(m["calls"] for m in report["models"].values())
    assert calls == stats["completed"]
    assert report["usage"]["prompt_tokens"] == stats["prompt_tokens"]
    assert report["usage"]["completion_tokens"] == stats["completion_tokens"]


def tool_messages(fs: FaultStack, handle: SwarmHandle, node: str) -> list[str]:
    transcript = fs.client().store.transcript(handle.id, node)
    assert transcript is not None
    return [m["content"] for m in transcript.messages if m["role"] == "tool"]


def test_review_finds_a_bug_only_in_a_file_the_diff_does_not_touch(
    fs: FaultStack, tmp_path: Path
) -> None:
    finding = {
        "risks": [{"severity": "high", "file": "src/util.py", "line": 2,
                   "description": "ratio() divides by n, which may be zero"}],
        "summary": "share() now calls ratio(), whose divisor is unchecked",
    }  # fmt: skip
    message = f"share() takes n\n\n[[sim:read=src/util.py]] [[sim:reply_b64={b64(finding)}]]"
    repo, _, second = make_repo(tmp_path, message)
    items = commit_inputs(repo, last=1)
    assert "BUG" not in items[0].text and "util.py" not in items[0].text.split("[[sim")[0]
    fs.stack.reset_stats()
    handle = fs.client().submit(
        items, REVIEW_INSTRUCTION, kind="review", output_schema=REVIEW_SCHEMA,
        tools="repo", tool_root=str(repo),
    )  # fmt: skip
    report = handle.wait(timeout=60).to_dict()
    node = report["nodes"][0]
    assert report["status"] == "succeeded", report.get("error")
    assert (node["steps"], node["tool_calls"], node["tool_errors"]) == (2, 1, 0)
    assert node["tools_used"] == ["read_file(path='src/util.py')"]
    [read] = tool_messages(fs, handle, node["node_id"])
    assert read.startswith("src/util.py lines 1-2 of 2") and "BUG: b may be zero" in read
    assert json.loads(node["content"])["risks"][0]["file"] == "src/util.py"
    assert report["models"][node["model"]]["tool_call_validity"] == 1.0
    billed_as_served(fs, report)
    # Path escapes are refused inside the worker, at the reviewed commit.
    paths = ("../outside.txt", "/etc/passwd", "src/link_out.txt", "src/link_in.py")
    escapes = script([("read_file", {"path": p}) for p in paths])
    item = InputItem(ref=f"{second[:12]} escapes", text=f"try {escapes}")
    handle = fs.client().submit([item], "Look around", tools="repo", tool_root=str(repo))
    report = handle.wait(timeout=60).to_dict()
    outside, absolute, link_out, link_in = tool_messages(fs, handle, "n0000")
    assert "'..' is refused" in outside and "absolute paths" in absolute
    assert "symlink out of the repository" in link_out and "BUG" in link_in
    assert "secret" not in json.dumps(report) and report["nodes"][0]["tool_errors"] == 3


def test_raising_slow_and_huge_tools_and_the_loop_guard(fs: FaultStack) -> None:
    fs.stack.reset_stats()
    calls = [("explode", {"why": "x"}), ("slow", {"seconds": 30}), ("flood", {"megabytes": 10})]
    mixed = script([*calls, ("shout", '{"text": ')])  # the last one's arguments are not JSON
    items = [InputItem(ref="mixed", text=mixed), InputItem(ref="loop", text="[[sim:tool_loop]]")]
    handle = fs.client().submit(items, "Use the tools", tools="agent_tools")
    report = handle.wait(timeout=60).to_dict()
    mixed_node, loop_node = report["nodes"]
    assert mixed_node["status"] == "ok" and mixed_node["steps"] == 2
    counts = ("tool_calls", "tool_errors", "tool_calls_invalid")
    assert tuple(mixed_node[k] for k in counts) == (4, 3, 1)
    raised, slow, flood, malformed = tool_messages(fs, handle, "n0000")
    assert malformed.startswith("error: the arguments of shout are not JSON")
    assert raised == "error: explode raised RuntimeError: boom: x"
    assert slow == "error: slow timed out after 0.2 s"
    assert flood.endswith(f"[... output cut: 1000 of {10 * 1024 * 1024} characters shown ...]")
    assert loop_node["error_kind"] == "tool_loop" and loop_node["steps"] == 3
    assert "the same tool call a third time: add(a=1)" in loop_node["error"]
    transcript = fs.client().store.transcript(handle.id, "n0001")
    assert transcript is not None and transcript.ended.startswith("tool_loop")
    shown = subprocess.run(
        [sys.executable, "-m", "swarm.cli.main", "status", handle.id, "--node", "n0001"],
        env={**os.environ, **fs.env}, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.count('call call_2_0: add({"a": 1})') == 1
    assert shown.stdout.rstrip().endswith("ended: tool_loop: the same tool call a third time: "
                                          "add(a=1)")  # fmt: skip
    assert report["status"] == "partial"
    model = report["models"][mixed_node["model"]]
    assert model["tool_calls"] == 7 and model["tool_call_validity"] == round(6 / 7, 4)
    billed_as_served(fs, report)


def test_a_sigkilled_node_resumes_from_its_stored_steps(fs: FaultStack) -> None:
    a1, a2 = fs.ensure_workers(["a1", "a2"], 4)
    fs.stack.reset_stats()
    text = "[[sim:tool_steps=5]] [[sim:latency_ms=1000]]"
    handle = fs.client().submit(
        [InputItem(ref="six", text=text)], "Look it up", tools="agent_tools"
    )

    def steps_done() -> int:
        transcript = fs.client().store.transcript(handle.id, "n0000")
        return (
            0 if transcript is None else sum(m["role"] == "assistant" for m in transcript.messages)
        )

    wait_until(lambda: steps_done() >= 3, 60, "three steps stored")
    holder = next(w for w in (a1, a2) if task_lines(w.log_text(), handle.id, "received"))
    holder.kill()  # SIGKILL in step 4 of 6
    killed_at_step = steps_done()
    report = handle.wait(timeout=90).to_dict()
    node = report["nodes"][0]
    assert report["status"] == "succeeded", report.get("error")
    assert node["steps"] == 6 and node["tool_calls"] == 5
    node_calls = fs.stack.stats()["requests"] - 1  # less the aggregation
    assert node_calls <= node["steps"] + 1, node_calls
    billed_as_served(fs, report)
    print(f"\nFIGURE agent sigkill: killed after {killed_at_step} stored steps; "
          f"gateway calls for the 6-step node {node_calls}")  # fmt: skip
