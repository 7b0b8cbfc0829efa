"""Tools the unit tests load by import path (``agent_tools``, ``agent_tools:few``)."""

from __future__ import annotations

import time

from swarm import tool

CALLS: list[str] = []


@tool
def add(a: int, b: int = 1) -> int:
    """Add two integers."""
    CALLS.append(f"add({a},{b})")
    return a + b


@tool
def shout(text: str) -> str:
    """Upper-case a text."""
    CALLS.append(f"shout({text})")
    return text.upper()


@tool
def explode(why: str) -> str:
    """Always raises."""
    raise RuntimeError(f"boom: {why}")


@tool(timeout_s=0.2)
def slow(seconds: float) -> str:
    """Sleeps."""
    time.sleep(seconds)
    return "woke"


@tool(max_output_chars=1000)
def flood(megabytes: int) -> str:
    """Returns a huge text."""
    return "x" * (megabytes * 1024 * 1024)


few = [add, shout]
none: list[object] = []
