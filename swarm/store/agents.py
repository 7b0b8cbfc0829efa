"""Records an agent node keeps in the job store: tool results and its transcript.

A tool result is stored under a key derived from the step that asked for it, so a node run
again (a redelivered message, a resumed job) finds it and does not run the tool twice; the
first stored result wins. The transcript is the node's conversation as it stands, written
after every step, so a node that ends badly (a loop, the budget, a crash) keeps it.
"""

from __future__ import annotations

from typing import Any

from swarm.records import Frozen


class ToolOutcome(Frozen):
    """What one tool call answered the model."""

    content: str
    """The text sent back as the tool message (the error text when ``error``)."""
    error: bool = False
    """True when the call was malformed, the tool raised or timed out."""
    invalid: bool = False
    """True when the call did not parse or match a tool's schema."""


class Transcript(Frozen):
    """An agent node's conversation, step by step."""

    node_id: str
    """The node."""
    messages: tuple[dict[str, Any], ...] = ()
    """Every message sent and received (system, user, assistant with tool calls, tool)."""
    ended: str = ""
    """Why the loop stopped (``answered``, ``tool_loop: ...``, an error), or "" while it runs."""
