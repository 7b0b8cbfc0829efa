"""Unit-test doubles: an openai client over httpx's MockTransport."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx2
import openai

Handler = Callable[[dict[str, Any], int], httpx2.Response]


def completion(
    content: str,
    prompt: int = 10,
    completion_tokens: int = 5,
    cached: int = 0,
    finish: str = "stop",
) -> httpx2.Response:
    return httpx2.Response(
        200,
        json={
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": finish,
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt + completion_tokens,
                "prompt_tokens_details": {"cached_tokens": cached},
            },
        },
    )


class MockGateway:
    """Answers chat completions with ``handler(body, call_number)``; records requests."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests: list[dict[str, Any]] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        return self.handler(body, len(self.requests))

    def client(self) -> openai.OpenAI:
        http = httpx2.Client(transport=httpx2.MockTransport(self))
        return openai.OpenAI(base_url="http://gw/v1", api_key="k", max_retries=0, http_client=http)
