"""Unit tests of the test-only helpers in tests/integration/procs.py (the processes themselves:
tests/unit/procs)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))

import procs


def test_with_db_replaces_only_the_db() -> None:
    assert procs.with_db("redis://127.0.0.1:7000/0", 3) == "redis://127.0.0.1:7000/3"
    assert procs.with_db("redis://:pw@h:1", 2) == "redis://:pw@h:1/2"
    assert procs.with_db("redis://h:1/0?protocol=3", 1) == "redis://h:1/1?protocol=3"
