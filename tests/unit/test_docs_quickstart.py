"""The quickstarts' simulator asks for the key their shell exports, so a key mistake made
there shows as it would against a real gateway."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("page", ["README.md", "docs/getting-started.md"])
def test_the_quickstarts_simulator_asks_for_the_exported_key(page: str) -> None:
    text = (ROOT / page).read_text("utf-8")
    sim = next(line for line in text.splitlines() if line.startswith("swarm sim "))
    words = shlex.split(sim.split("#")[0])
    assert "--api-key" in words, sim
    key = words[words.index("--api-key") + 1]
    exported = re.search(r"^export .*\bSWARM_API_KEY=(\S+)", text, re.M)
    assert exported is not None and exported.group(1) == key
