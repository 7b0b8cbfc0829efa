"""Toolsets by name: the built-in ``repo`` and ``docs``, or a user's import path.

``pkg.module`` takes every @tool of that module (in definition order); ``pkg.module:attr``
takes ``attr``, a list (or tuple) of tools or one tool. Producers check the name when a
job is submitted; each worker loads it when a node runs, and a worker that cannot
(the package is not installed there) ends the node with one clear error.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from swarm.errors import InputError
from swarm.records import JobSpec
from swarm.store.base import JobStore
from swarm.tools import docs, repo
from swarm.tools.registry import Tool


@dataclass(frozen=True)
class ToolContext:
    """What a built-in toolset needs to know of the node it serves."""

    spec: JobSpec
    node_id: str
    store: JobStore


BUILTIN: dict[str, Callable[[ToolContext], Sequence[Tool]]] = {
    "repo": lambda ctx: repo.toolset(ctx.spec.tool_root, ctx.spec.input_ref(ctx.node_id)),
    "docs": lambda ctx: docs.toolset(ctx.spec, ctx.store),
}


class ToolsetError(InputError):
    """A toolset name that cannot be loaded (not importable, or no tools in it)."""


def load_toolset(name: str, ctx: ToolContext | None = None) -> dict[str, Tool]:
    """The tools of ``name`` by tool name; ToolsetError when it cannot be loaded.

    Without ``ctx`` a built-in name is only checked (it needs a node to serve).
    """
    if name in BUILTIN:
        return {} if ctx is None else _by_name(name, BUILTIN[name](ctx))
    return _by_name(name, imported(name))


def _by_name(name: str, tools: Sequence[Tool]) -> dict[str, Tool]:
    found: dict[str, Tool] = {}
    for item in tools:
        if item.name in found:
            raise ToolsetError(f"toolset {name}: two tools are named {item.name!r}")
        found[item.name] = item
    if not found:
        raise ToolsetError(f"toolset {name}: no @tool functions in it")
    return found


def imported(path: str) -> list[Tool]:
    """The tools an import path names (``pkg.module`` or ``pkg.module:attr``)."""
    module_name, _, attr = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ToolsetError(
            f"toolset {path!r}: cannot import {module_name} ({exc}); built-in toolsets: "
            f"{', '.join(sorted(BUILTIN))}"
        ) from None
    if not attr:
        return [value for value in vars(module).values() if isinstance(value, Tool)]
    value = getattr(module, attr, None)
    if isinstance(value, Tool):
        return [value]
    if isinstance(value, list | tuple) and all(isinstance(v, Tool) for v in value):
        return list(value)
    raise ToolsetError(f"toolset {path!r}: {attr} is not a @tool or a list of them")
