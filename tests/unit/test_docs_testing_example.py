"""docs/producer-api.md's "Testing your own code" example, run as it is written: its test
function, over swarm.testing.embedded(), passes."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

PAGE = Path(__file__).resolve().parents[2] / "docs" / "producer-api.md"


def test_the_documented_test_of_a_users_pipeline_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWARM_BROKER_URL", "redis://127.0.0.1:9/0")  # never used: in memory
    text = PAGE.read_text()
    start = text.index("## Testing your own code\n")
    section = text[start : text.index("\n## ", start + 1)]
    (code,) = re.findall(r"^```python\n(.*?)^```$", section, re.M | re.S)
    namespace: dict[str, Any] = {}
    exec(compile(code, str(PAGE), "exec"), namespace)
    namespace["test_my_pipeline"]()
