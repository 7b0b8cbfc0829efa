"""The toolset of ops/bench/agent_steps.py (workers import it by this name)."""

from __future__ import annotations

from swarm import tool


@tool
def lookup(key: str) -> str:
    """Look a key up in a small table."""
    return f"{key} = {sum(map(ord, key)) % 997}"
