"""MkDocs hook: the reference parts of the docs, generated from the code at every build.

A page marks where a generated part goes with an HTML comment on a line of its own:

- ``<!-- swarm:settings -->``: every field of ``swarm.settings.Settings`` (environment
  variable, type, default, bounds, and the field's docstring);
- ``<!-- swarm:catalog-models -->`` and ``<!-- swarm:catalog-backends -->``: every field of
  a ``[models.NAME]`` (``swarm.catalog.ModelSpec``) and a ``[backends.NAME]``
  (``swarm.backends.BackendSpec``) table, with its docstring;
- ``<!-- swarm:api -->``: one mkdocstrings block per name of ``swarm.__all__`` (grouped by
  the module that defines it), then ``swarm.testing`` when that module exists.

Why a hook rather than a committed page checked by a test, or the mkdocs-gen-files plugin:
the page is rebuilt from the code every time the site is built, and ``./ops/test`` builds
the site (``mkdocs build --strict``), so a setting, catalog field or public name added,
renamed or removed shows in the docs at once, with nothing to regenerate and commit and no
extra plugin. A field without a docstring fails the build (``DocsError``), so the reference
cannot fall behind the code either. The price: the page's Markdown source shows the marker,
not the table (read the built site, or ``swarm`` in Python: ``help(Settings)``).

Field docstrings are read from the source with ``ast`` (pydantic keeps them only with
``use_attribute_docstrings``, which the models do not set); types, defaults and bounds come
from pydantic's ``model_fields``.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import re
import textwrap
import types
import typing
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

MARKER = re.compile(r"^<!-- swarm:([a-z-]+) -->$", re.MULTILINE)

CATALOG_SKIP = {"name", "implicit"}
"""Fields of the catalog models a user does not write: the table's key, and the flag on
the backend made up for models that name none."""

API_GROUPS = {
    "swarm.client": "Client and handles",
    "swarm.jobs.report": "Records",
    "swarm.records": "Records",
    "swarm.catalog": "Configuration",
    "swarm.settings": "Configuration",
    "swarm.tools": "Tools for sub-agents",
    "swarm.errors": "Errors",
}


API_FIRST = ("SwarmClient", "SwarmHandle", "submit", "attach", "AsyncSwarmClient",
             "AsyncSwarmHandle")  # fmt: skip
"""Names shown first in their group, in this order (a reader meets the blocking client
before its asyncio flavour); the others follow in ``swarm.__all__``'s (alphabetical) order."""


WRAPPERS = {"AsyncSwarmClient", "AsyncSwarmHandle"}
"""Classes whose attributes are set in ``__init__`` from its arguments: their values there
are code, not documentation (the attribute's type and docstring say what it is)."""
HIDE_VALUES = "\n    options:\n      show_attribute_values: false"


class DocsError(Exception):
    """The code lacks what a generated page needs (e.g. a field without a docstring)."""


def field_docs(model: type[BaseModel]) -> dict[str, str]:
    """Each field's docstring (the string literal right after its annotated assignment)."""
    source = textwrap.dedent(inspect.getsource(model))
    body = ast.parse(source).body[0]
    assert isinstance(body, ast.ClassDef)
    docs: dict[str, str] = {}
    for stmt, nxt in zip(body.body, body.body[1:], strict=False):
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        value = nxt.value if isinstance(nxt, ast.Expr) else None
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            docs[stmt.target.id] = inspect.cleandoc(value.value)
    missing = [name for name in model.model_fields if name not in docs]
    if missing:
        raise DocsError(f"{model.__qualname__}: no docstring for field(s) {', '.join(missing)}")
    return docs


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _type_name(tp: Any) -> str:
    """A type as a reader writes it: ``int | None``, ``"bucket" | "sliding"``."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is None or tp is type(None):
        return "None"
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_name(arg) for arg in args)
    if origin is typing.Literal:
        return " | ".join(f'"{arg}"' if isinstance(arg, str) else repr(arg) for arg in args)
    if tp is SecretStr:
        return "secret str"
    if origin is not None:
        return f"{origin.__name__}[{', '.join(_type_name(arg) for arg in args)}]"
    return str(getattr(tp, "__name__", tp))


def _metadata(info: FieldInfo) -> list[Any]:
    """The field's constraints, also those inside an ``Annotated`` of an optional type."""
    found = list(info.metadata)
    for arg in typing.get_args(info.annotation):
        for meta in typing.get_args(arg)[1:] if typing.get_origin(arg) is typing.Annotated else []:
            found.extend(meta.metadata if isinstance(meta, FieldInfo) else [meta])
    return found


def _default(info: FieldInfo) -> str:
    if info.default is PydanticUndefined:
        return "required" if info.default_factory is None else "empty"
    if info.default is None:
        return "unset"
    if isinstance(info.default, bool):
        return str(info.default).lower()
    return f"`{info.default}`"


def _bounds(info: FieldInfo) -> str:
    ops = {"gt": ">", "ge": ">=", "lt": "<", "le": "<="}
    found = []
    for meta in _metadata(info):
        for attr, sign in ops.items():
            value = getattr(meta, attr, None)
            if value is not None:
                found.append(f"{sign} {value}")
    return ", ".join(found)


def _env_names(name: str, info: FieldInfo) -> str:
    alias = info.validation_alias
    choices = getattr(alias, "choices", None)
    if choices:
        return " or ".join(f"`{choice}`" for choice in choices)
    return f"`SWARM_{name.upper()}`"


def settings_table() -> str:
    """The environment variables: every field of Settings."""
    from swarm.settings import Settings

    docs = field_docs(Settings)
    rows = [
        "| variable | type | default | meaning |",
        "|---|---|---|---|",
    ]
    for name, info in Settings.model_fields.items():
        bounds = _bounds(info)
        kind = _type_name(info.annotation) + (f" ({bounds})" if bounds else "")
        rows.append(
            f"| {_env_names(name, info)} | {_cell(kind)} | {_default(info)} | {_cell(docs[name])} |"
        )
    return "\n".join(rows)


def _catalog_table(model: type[BaseModel]) -> str:
    docs = field_docs(model)
    rows = ["| field | type | default | meaning |", "|---|---|---|---|"]
    for name, info in model.model_fields.items():
        if name in CATALOG_SKIP:
            continue
        bounds = _bounds(info)
        kind = _type_name(info.annotation) + (f" ({bounds})" if bounds else "")
        rows.append(f"| `{name}` | {_cell(kind)} | {_default(info)} | {_cell(docs[name])} |")
    return "\n".join(rows)


def catalog_models_table() -> str:
    """Every field of a ``[models.NAME]`` table."""
    from swarm.catalog import ModelSpec

    return _catalog_table(ModelSpec)


def catalog_backends_table() -> str:
    """Every field of a ``[backends.NAME]`` table."""
    from swarm.backends import BackendSpec

    return _catalog_table(BackendSpec)


def api_blocks() -> str:
    """mkdocstrings blocks for ``swarm.__all__``, grouped by defining module."""
    import swarm

    lazy: dict[str, str] = swarm._LAZY
    groups: dict[str, list[str]] = {}
    first = {name: rank for rank, name in enumerate(API_FIRST)}
    for name in sorted(swarm.__all__, key=lambda name: first.get(name, len(first))):
        module = lazy.get(name, "swarm.errors")
        block = f"::: {module}.{name}" + (HIDE_VALUES if name in WRAPPERS else "")
        groups.setdefault(API_GROUPS.get(module, "Other"), []).append(block)
    parts = []
    for title in dict.fromkeys([*API_GROUPS.values(), "Other"]):  # in API_GROUPS' order
        if title in groups:
            parts.append(f"### {title}\n\n" + "\n\n".join(groups[title]))
    if importlib.util.find_spec("swarm.testing") is not None:
        parts.append("### Testing helpers\n\n::: swarm.testing")
    return "\n\n".join(parts)


GENERATORS: dict[str, Callable[[], str]] = {
    "settings": settings_table,
    "catalog-models": catalog_models_table,
    "catalog-backends": catalog_backends_table,
    "api": api_blocks,
}


def on_page_markdown(markdown: str, **_: Any) -> str:
    """Replace each marker by its generated Markdown; an unknown marker fails the build."""

    def expand(match: re.Match[str]) -> str:
        generator = GENERATORS.get(match.group(1))
        if generator is None:
            raise DocsError(f"unknown marker <!-- swarm:{match.group(1)} -->")
        return generator()

    return MARKER.sub(expand, markdown)


if __name__ == "__main__":  # print the generated parts, e.g. to review them
    for key, make in GENERATORS.items():
        print(f"<!-- {key} -->\n{make()}\n")
