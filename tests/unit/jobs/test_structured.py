from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from swarm.jobs.structured import BadOutputError, extract_json, validate_output


class Risk(BaseModel):
    severity: str
    file: str
    line: int | None = None


class Review(BaseModel):
    risks: list[Risk]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ("  [1, 2]\n", [1, 2]),
        ('```json\n{"a": 1}\n```', {"a": 1}),
        ('Here is the review:\n```\n{"a": [1, 2]}\n```\nThanks', {"a": [1, 2]}),
        ('Sure! {"a": 1, "b": "x"}', {"a": 1, "b": "x"}),
        ('{"a": 1, "b": [1, 2', {"a": 1, "b": [1, 2]}),
        ("{'a': 1}", {"a": 1}),
        ('{"a": 1,}', {"a": 1}),
        (
            '{"risks": [{"severity": "high", "file": "x.py", "line": 3}]}',
            {"risks": [{"severity": "high", "file": "x.py", "line": 3}]},
        ),
    ],
)
def test_json_repair_table(text: str, expected: Any) -> None:
    assert extract_json(text) == expected


@pytest.mark.parametrize("text", ["", "no json here", "42", '"just a string"'])
def test_no_json_object(text: str) -> None:
    with pytest.raises(BadOutputError):
        extract_json(text)


def test_schema_validation() -> None:
    ok = validate_output('```json\n{"risks": [{"severity": "low", "file": "a.py"}]}\n```', Review)
    assert ok.risks[0].file == "a.py" and ok.risks[0].line is None
    with pytest.raises(BadOutputError, match=r"risks\.0\.file"):
        validate_output('{"risks": [{"severity": "low"}]}', Review)
