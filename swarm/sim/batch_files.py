"""The simulated Batch API's JSONL files: an input file read into request lines (or the
validation errors that fail its batch), and the lines of the error files it produces.

An input line is ``{"custom_id", "method": "POST", "url": ENDPOINT, "body"}``; a file fails
as a whole when a line is not such an object, or when it is empty, over ``max_lines``,
repeats a ``custom_id`` or names two models where ``one_model``. A line whose body holds a
field of ``refused_fields`` is kept and fails on its own (its refusal)."""

from __future__ import annotations

import json
import uuid
from typing import Any

from swarm.sim.batch_config import BatchSimConfig
from swarm.sim.batch_records import Line

ENDPOINT = "/v1/chat/completions"


def parse_file(data: bytes, config: BatchSimConfig) -> tuple[list[Line], list[dict[str, Any]]]:
    """The file's lines, or the validation errors that fail the batch."""
    lines: list[Line] = []
    for number, raw in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
        if not raw.strip():
            continue
        try:
            item = json.loads(raw)
        except ValueError:
            return [], [_validation("invalid_json_line", "line is not JSON", number)]
        problem = _line_problem(item)
        if problem is not None:
            return [], [_validation("invalid_request", problem, number)]
        lines.append(Line(item["custom_id"], item["body"], _refusal(item["body"], config)))
    return lines, _file_problems(lines, config)


def _refusal(body: dict[str, Any], config: BatchSimConfig) -> str | None:
    refused = [name for name in config.refused_fields if name in body]
    return f"field(s) not supported in batch: {', '.join(refused)}" if refused else None


def _file_problems(lines: list[Line], config: BatchSimConfig) -> list[dict[str, Any]]:
    if not lines:
        return [_validation("empty_file", "the file holds no request", None)]
    if len(lines) > config.max_lines:
        message = f"{len(lines)} lines is over the {config.max_lines} limit"
        return [_validation("too_many_lines", message, None)]
    if len({line.custom_id for line in lines}) != len(lines):
        return [_validation("duplicate_custom_id", "custom_id values repeat", None)]
    models = {str(line.body.get("model")) for line in lines}
    if config.one_model and len(models) > 1:
        message = f"one model per file, this one names {len(models)}"
        return [_validation("mixed_models", message, None)]
    return []


def _line_problem(item: object) -> str | None:
    if not isinstance(item, dict):
        return "line is not a JSON object"
    if not isinstance(item.get("custom_id"), str) or not item["custom_id"]:
        return "line needs a string custom_id"
    if item.get("method") != "POST":
        return "method must be POST"
    if item.get("url") != ENDPOINT:
        return f"url must be {ENDPOINT}"
    if not isinstance(item.get("body"), dict):
        return "body must be a JSON object"
    return None


def _validation(code: str, message: str, line: int | None) -> dict[str, Any]:
    return {"code": code, "message": message, "param": None, "line": line}


def req_id() -> str:
    return f"batch_req_{uuid.uuid4().hex[:24]}"


def line_error(line: Line, status: int | None, code: str, message: str) -> str:
    error = {"message": message, "type": "server_error" if status == 500 else code,
             "param": None, "code": code}  # fmt: skip
    if status is None:
        return json.dumps({"id": req_id(), "custom_id": line.custom_id, "response": None,
                           "error": {"code": code, "message": message}})  # fmt: skip
    response = {"status_code": status, "request_id": req_id(), "body": {"error": error}}
    return json.dumps({"id": req_id(), "custom_id": line.custom_id,
                       "response": response, "error": None})  # fmt: skip
