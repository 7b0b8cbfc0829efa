"""``@tool``: a typed Python function becomes a tool a model can call.

The tool's JSON schema comes from the function's signature (a pydantic model built from its
parameters, so the same model validates the arguments a model sends), its description from
the docstring. Defaults of timeout and output cap come from the settings
(``SWARM_TOOL_TIMEOUT_S``, ``SWARM_TOOL_MAX_OUTPUT_CHARS``); a tool may set its own.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, overload

from pydantic import BaseModel, ConfigDict, create_model

MAX_LINES = 400
"""Lines one read of a file or document returns at most."""


class _Arguments(BaseModel):
    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class Tool:
    """A function a model may call, with what the model is told about it."""

    fn: Callable[..., Any]
    name: str
    description: str
    arguments: type[BaseModel]
    """Validates the arguments; its JSON schema is the tool's ``parameters``."""
    timeout_s: float | None = None
    """Longest run; None: the settings' default."""
    max_output_chars: int | None = None
    """Output kept (the rest is cut with a marker); None: the settings' default."""
    schema: dict[str, Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        parameters = self.arguments.model_json_schema()
        parameters.pop("title", None)
        function = {"name": self.name, "description": self.description, "parameters": parameters}
        object.__setattr__(self, "schema", {"type": "function", "function": function})

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)


def arguments_model(fn: Callable[..., Any], name: str) -> type[BaseModel]:
    """A pydantic model of ``fn``'s parameters (annotations and defaults)."""
    fields: dict[str, Any] = {}
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"tool {name}: *args and **kwargs cannot be described to a model")
        annotation = Any if param.annotation is param.empty else param.annotation
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (annotation, default)
    return create_model(f"{name}_arguments", __base__=_Arguments, **fields)


def make_tool(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    timeout_s: float | None = None,
    max_output_chars: int | None = None,
) -> Tool:
    """The Tool of ``fn`` (see ``tool``)."""
    tool_name = name or fn.__name__
    description = inspect.cleandoc(fn.__doc__ or "").strip() or tool_name
    return Tool(
        fn=fn,
        name=tool_name,
        description=description,
        arguments=arguments_model(fn, tool_name),
        timeout_s=timeout_s,
        max_output_chars=max_output_chars,
    )


def line_range(name: str, lines: list[str], start_line: int, end_line: int) -> str:
    """Lines ``start_line``..``end_line`` (1-based, inclusive, at most MAX_LINES) of the
    text ``name``, numbered, under a line saying which of how many they are (the reading
    tools' answer)."""
    start = max(start_line, 1)
    end = min(end_line, start + MAX_LINES - 1, len(lines))
    body = [f"{n:>5}  {lines[n - 1]}" for n in range(start, end + 1)]
    return "\n".join([f"{name} lines {start}-{end} of {len(lines)}", *body])


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    *, name: str | None = None, timeout_s: float | None = None, max_output_chars: int | None = None
) -> Callable[[Callable[..., Any]], Tool]: ...
def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    timeout_s: float | None = None,
    max_output_chars: int | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a typed function a tool: ``@tool`` or ``@tool(timeout_s=5, max_output_chars=2000)``.

    The decorated name stays callable as the function; toolsets collect it by type.
    """
    if fn is not None:
        return make_tool(fn)

    def decorate(inner: Callable[..., Any]) -> Tool:
        return make_tool(inner, name=name, timeout_s=timeout_s, max_output_chars=max_output_chars)

    return decorate
