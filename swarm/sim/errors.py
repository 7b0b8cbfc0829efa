"""The simulator's error answers in OpenAI's shape: ``{"error": {message, type, param,
code}}``, the ``type`` following the HTTP status unless a caller names it."""

from __future__ import annotations

from typing import Any

from aiohttp import web

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    409: "conflict_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
}


def error_type(status: int) -> str:
    """OpenAI error ``type`` for an HTTP status."""
    return ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")


def error_body(
    message: str, kind: str | None, code: str | None, param: str | None = None
) -> dict[str, Any]:
    """The JSON body of an error: ``kind`` is its ``type``."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def error_response(
    status: int,
    message: str,
    code: str | None,
    param: str | None = None,
    headers: dict[str, str] | None = None,
    kind: str | None = None,
) -> web.Response:
    """An error answer; its ``type`` is ``kind``, or the status's (``error_type``)."""
    body = error_body(message, kind or error_type(status), code, param)
    return web.json_response(body, status=status, headers=headers)
