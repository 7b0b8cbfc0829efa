"""A user's toolset as workers import it (``e2e_tools``; the workers get this folder on
PYTHONPATH): a tool that raises, a slow one and one with a 10 MB output."""

from __future__ import annotations

import time

from swarm import tool


@tool
def explode(why: str) -> str:
    """Always raises."""
    raise RuntimeError(f"boom: {why}")


@tool(timeout_s=1.0)
def slow(seconds: float) -> str:
    """Sleeps for the given seconds."""
    time.sleep(seconds)
    return "woke"


@tool
def flood(megabytes: int) -> str:
    """Returns a text of the given size."""
    return "x" * (megabytes * 1024 * 1024)


@tool
def lookup(key: str) -> str:
    """Looks a key up."""
    return f"value of {key}"
