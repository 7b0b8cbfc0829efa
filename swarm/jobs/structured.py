"""Strict JSON outputs (models break JSON now and then): parse, repair, validate.

A model asked for JSON may still wrap it in a Markdown fence, add a sentence before it, or
stop mid-object. We try, in order: the text as JSON, the first fenced block, then
json-repair (a maintained library) on the whole text. The result must be an object or a list,
and when a schema is given it must validate against it.
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar

import json_repair
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)
_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


class BadOutputError(ValueError):
    """The answer is not usable JSON, or does not match the schema."""


def extract_json(text: str) -> dict[str, Any] | list[Any]:
    """The JSON object or list in ``text``; BadOutputError when there is none."""
    fenced = [m.group(1).strip() for m in _FENCE.finditer(text)]
    for candidate in [text.strip(), *fenced]:
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict | list):
            return value
    repaired = json_repair.repair_json(text, return_objects=True)
    if isinstance(repaired, dict | list) and repaired:
        return repaired
    raise BadOutputError(f"no JSON object in the answer: {text[:80]!r}")


def validate_output(text: str, schema: type[M]) -> M:
    """Parse ``text`` and validate it as ``schema``; BadOutputError says what is wrong."""
    value = extract_json(text)
    try:
        return schema.model_validate(value)
    except ValidationError as exc:
        raise BadOutputError(f"answer does not match {schema.__name__}: {_first(exc)}") from None


def _first(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"]) or "(root)"
    return f"{loc}: {err['msg']}"


def validate_against(text: str, schema: dict[str, Any]) -> dict[str, Any] | list[Any]:
    """Parse ``text`` and check it against a JSON schema (jsonschema, Draft 2020-12)."""
    value = extract_json(text)
    try:
        validator = Draft202012Validator(schema)
    except SchemaError as exc:
        raise BadOutputError(f"the output schema itself is invalid: {exc.message}") from None
    error = next(iter(sorted(validator.iter_errors(value), key=lambda e: list(e.path))), None)
    if error is not None:
        where = ".".join(str(p) for p in error.absolute_path) or "(root)"
        raise BadOutputError(f"answer does not match the schema at {where}: {error.message}")
    return value


def schema_instruction(instruction: str, schema: dict[str, Any] | None) -> str:
    """The instruction, with the JSON schema the answer must follow appended."""
    if schema is None:
        return instruction
    return (
        f"{instruction}\n\nAnswer with one JSON object only, no prose.\n"
        f"JSON schema:\n```json\n{json.dumps(schema)}\n```"
    )
