"""The plain Celery baseline of `swarm bench overhead`: no swarm code at all.

One chord per run: ``plain.call`` tasks that each make one openai SDK call (the SDK's
usual ``chat.completions.create``), then ``plain.aggregate`` making one more; JSON
serializers, acks_late and prefetch 1 like swarm. Workers import this file as the
top-level module ``plain_chord`` (PYTHONPATH is this folder), so not even the swarm
package is imported in them; they read their broker, result backend and gateway from
PLAIN_BROKER_URL, PLAIN_RESULT_URL and PLAIN_BASE_URL.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import openai
from celery import Celery

MODEL = "kimi-k2.5"
QUEUE = "plain"
TIMEOUT_S = 10.0
_lock = threading.Lock()
_clients: list[openai.OpenAI] = []


def make_app(broker_url: str, result_url: str) -> Celery:
    """The baseline's Celery app (producer and worker alike)."""
    app = Celery("plain", broker=broker_url, backend=result_url, set_as_current=False)
    app.conf.update(
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        result_accept_content=["json"],
        task_acks_late=True,
        worker_prefetch_multiplier=1,
        result_chord_retry_interval=0.1,
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
        task_default_queue=QUEUE,
    )
    app.task(name="plain.call")(call)
    app.task(name="plain.aggregate")(aggregate)
    return app


def _client() -> openai.OpenAI:
    """One client per process, shared by its threads (keep-alive connections)."""
    with _lock:
        if not _clients:
            _clients.append(
                openai.OpenAI(
                    base_url=os.environ["PLAIN_BASE_URL"],
                    api_key="bench-not-a-key",
                    max_retries=0,
                    timeout=TIMEOUT_S,
                )
            )
        return _clients[0]


def _complete(instruction: str, text: str) -> int:
    completion = _client().chat.completions.create(
        model=MODEL,
        messages=[{"role": "system", "content": instruction}, {"role": "user", "content": text}],
        max_tokens=512,
        temperature=0.2,
    )
    return len(completion.choices[0].message.content or "")


def call(text: str, instruction: str) -> int:
    """One sub-agent: one SDK call (a failure raises, as plain Celery code would)."""
    return _complete(instruction, text)


def aggregate(results: list[Any], instruction: str) -> int:
    """The chord callback: one SDK call (``instruction`` is its user message)."""
    return _complete("Merge the results.", f"{instruction}\n{len(results)} results")


app = make_app(
    os.environ.get("PLAIN_BROKER_URL", "memory://"), os.environ.get("PLAIN_RESULT_URL", "")
)
