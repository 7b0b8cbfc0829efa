"""Answers that follow a JSON schema, as a capable model in JSON mode would.

A request in JSON mode may carry a schema in ``response_format.json_schema.schema`` or, as
swarm's own prompts do for gateways that only offer ``json_object``, in its system message
after the line ``JSON schema:`` inside a fenced block. The simulator then answers with a
deterministic instance of that schema (``$defs``/``$ref``, objects, arrays with
minItems/maxItems, enums, anyOf, strings, numbers, booleans). Enum values are taken in turn
by array position, so a plan schema listing N inputs with ``minItems: N`` gets one item each.
"""

from __future__ import annotations

import json
import re
from typing import Any

SCHEMA_BLOCK = re.compile(r"JSON schema:\s*```(?:json)?\s*\n(.*?)```", re.DOTALL)
_MAX_DEPTH = 8


def schema_in(body: dict[str, Any], system_text: str) -> dict[str, Any] | None:
    """The schema a request asks its answer to follow, if any."""
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        schema = (fmt.get("json_schema") or {}).get("schema")
        if isinstance(schema, dict):
            return schema
    match = SCHEMA_BLOCK.search(system_text)
    if match:
        try:
            schema = json.loads(match.group(1))
        except ValueError:
            return None
        return schema if isinstance(schema, dict) else None
    return None


class _Filler:
    def __init__(self, root: dict[str, Any], seed: int) -> None:
        self.defs = root.get("$defs") or root.get("definitions") or {}
        self.seed = seed

    def resolve(self, schema: dict[str, Any]) -> dict[str, Any]:
        ref = schema.get("$ref")
        if isinstance(ref, str):
            return dict(self.defs.get(ref.rsplit("/", 1)[-1], {}))
        return schema

    def fill(self, schema: dict[str, Any], index: int, depth: int) -> Any:
        schema = self.resolve(schema)
        if schema.get("enum"):
            return schema["enum"][(index + self.seed) % len(schema["enum"])]
        if "const" in schema:
            return schema["const"]
        for key in ("anyOf", "oneOf", "allOf"):
            options = [o for o in schema.get(key, []) if self.resolve(o).get("type") != "null"]
            if options:
                return self.fill(options[0], index, depth)
        return self._by_type(schema, index, depth)

    def _by_type(self, schema: dict[str, Any], index: int, depth: int) -> Any:
        kind = schema.get("type", "object" if "properties" in schema else "string")
        if kind == "object":
            props = schema.get("properties", {}) if depth < _MAX_DEPTH else {}
            return {name: self.fill(sub, index, depth + 1) for name, sub in props.items()}
        if kind == "array":
            low = int(schema.get("minItems", 1))
            count = min(max(low, 1), int(schema.get("maxItems", max(low, 1))))
            item = schema.get("items", {})
            return (
                [self.fill(item, i, depth + 1) for i in range(count)] if depth < _MAX_DEPTH else []
            )
        if kind == "integer":
            return int(schema.get("minimum", 0)) + (self.seed + index) % 50
        if kind == "number":
            return float(schema.get("minimum", 0)) + ((self.seed + index) % 100) / 10
        if kind == "boolean":
            return (self.seed + index) % 2 == 0
        return f"{schema.get('title', 'value').lower()} {self.seed % 997}-{index}"


def instance_of(schema: dict[str, Any], seed: int) -> Any:
    """A deterministic instance of ``schema`` (``seed`` varies the choices)."""
    return _Filler(schema, seed).fill(schema, 0, 0)
