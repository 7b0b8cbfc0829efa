"""Tools for sub-agents: the ``@tool`` registry, named toolsets and running one tool call.

registry   ``@tool`` makes a typed function a Tool (JSON schema from its signature)
toolsets   a toolset by name: built-in ``repo`` and ``docs``, or ``pkg.module[:attr]``
runner     one tool call: validated, run with a timeout, its output capped
repo       read-only git tools at the reviewed commit, confined to the repository
docs       search and read the job's documents
"""

from swarm.tools.registry import Tool, tool

__all__ = ["Tool", "tool"]
