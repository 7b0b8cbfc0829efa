from __future__ import annotations

import json

import pytest

from swarm.catalog import load_catalog
from swarm.jobs.plan_schema import parse_plan, plan_schema, plannable_kinds, planner_messages
from swarm.jobs.structured import BadOutputError
from swarm.records import InputItem
from swarm.sim.content import make_completion, parse_chat_request

REFS = ["a.txt", "b.md"]
KINDS = ["extract", "summarize", "reason"]


def test_plannable_kinds_exclude_aggregate_and_plan() -> None:
    kinds = plannable_kinds(load_catalog())
    assert "extract" in kinds and "aggregate" not in kinds and "plan" not in kinds


def test_valid_plan_parses() -> None:
    text = json.dumps(
        {
            "subtasks": [
                {"kind": "extract", "input_ref": "a.txt", "instruction": "pull numbers"},
                {"kind": "summarize", "input_ref": "b.md", "instruction": "summarise"},
            ]
        }
    )
    plan = parse_plan(f"```json\n{text}\n```", REFS, KINDS)
    assert [(s.kind, s.input_ref) for s in plan.subtasks] == [
        ("extract", "a.txt"),
        ("summarize", "b.md"),
    ]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"subtasks": []}', "subtasks"),
        ("{}", "subtasks"),
        ("not json", "no JSON"),
        (
            '{"subtasks": [{"kind": "dance", "input_ref": "a.txt", "instruction": "x"},'
            ' {"kind": "extract", "input_ref": "b.md", "instruction": "y"}]}',
            "kind",
        ),
        (
            '{"subtasks": [{"kind": "extract", "input_ref": "zzz", "instruction": "x"},'
            ' {"kind": "extract", "input_ref": "b.md", "instruction": "y"}]}',
            "input_ref",
        ),
        (
            '{"subtasks": [{"kind": "extract", "input_ref": "a.txt", "instruction": ""},'
            ' {"kind": "extract", "input_ref": "b.md", "instruction": "y"}]}',
            "instruction",
        ),
    ],
)
def test_bad_plans_say_what_is_wrong(text: str, problem: str) -> None:
    with pytest.raises(BadOutputError, match=problem):
        parse_plan(text, REFS, KINDS)


def test_the_simulator_answers_the_planner_with_a_valid_plan() -> None:
    inputs = [InputItem(ref=r, text=f"text of {r}") for r in ["p1.txt", "p2.txt", "p3.txt"]]
    messages = planner_messages("survey these", inputs, KINDS)
    assert "JSON schema:" in messages[0]["content"]
    body = {"model": "kimi-k2.5", "messages": messages, "response_format": {"type": "json_object"}}
    answer = make_completion(parse_chat_request(body)).content
    plan = parse_plan(answer, [i.ref for i in inputs], KINDS)
    assert sorted(s.input_ref for s in plan.subtasks) == ["p1.txt", "p2.txt", "p3.txt"]


def test_retry_message_carries_the_error() -> None:
    msgs = planner_messages("q", [InputItem(ref="a", text="t")], KINDS, error="subtasks: too short")
    assert "rejected: subtasks: too short" in msgs[-1]["content"]
    assert plan_schema(["a"], KINDS).model_json_schema()["properties"]["subtasks"]["minItems"] == 1
