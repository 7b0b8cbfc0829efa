"""`swarm status JOB --node N`: an agent node's transcript, step by step; a node without
one (no tools) its outcome: status, model, attempts and error (the URL its call went to)."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import click

from swarm.cli.render import print_json
from swarm.errors import InputError
from swarm.store.base import JobStore

SHOWN_CHARS = 600
"""Characters of one message shown (the JSON output has them whole)."""


def print_transcript(store: JobStore, job_id: str, node_id: str, as_json: bool) -> None:
    """Print a node's transcript, or its outcome when it has none (a node without tools);
    InputError when the node has neither (not ended, or no such node)."""
    transcript = store.transcript(job_id, node_id)
    if transcript is None:
        print_outcome(store, job_id, node_id, as_json)
        return
    if as_json:
        print_json(transcript.model_dump(mode="json"))
        return
    for line in transcript_lines(transcript.messages):
        click.echo(line)
    click.echo(f"ended: {transcript.ended or 'running'}")


def print_outcome(store: JobStore, job_id: str, node_id: str, as_json: bool) -> None:
    """A node's envelope without its content: ``node N: ok on MODEL, 1 attempts, 1180 ms``
    (a failure: its kind and error)."""
    envelope = store.envelope(job_id, node_id)
    if envelope is None:
        raise InputError(f"node {node_id!r} of job {job_id} has not ended (or is not one of it)")
    if as_json:
        print_json(envelope.model_dump(mode="json", exclude={"content"}))
        return
    outcome = envelope.error_kind or "ok"
    line = f"node {node_id}: {outcome} on {envelope.model}, {envelope.attempts} attempts, "
    click.echo(line + f"{envelope.latency_ms} ms")
    if envelope.error:
        click.echo(f"error: {envelope.error}")


def transcript_lines(messages: tuple[dict[str, Any], ...]) -> list[str]:
    """One block per message: role, then its text or tool calls."""
    lines: list[str] = []
    step = 0
    for message in messages:
        role = message.get("role", "?")
        if role == "assistant":
            lines.append(f"--- step {step} (assistant)")
            step += 1
        else:
            lines.append(f"--- {role}" + (f" {message['tool_call_id']}" if role == "tool" else ""))
        if message.get("content"):
            lines.append(_cut(str(message["content"])))
        for call in message.get("tool_calls") or ():
            function = call.get("function", {})
            arguments = function.get("arguments", "")
            with contextlib.suppress(ValueError):
                arguments = json.dumps(json.loads(arguments), ensure_ascii=False)
            lines.append(f"call {call.get('id')}: {function.get('name')}({arguments})")
    return lines


def _cut(text: str) -> str:
    if len(text) <= SHOWN_CHARS:
        return text
    return text[:SHOWN_CHARS] + f" [... {len(text) - SHOWN_CHARS} more characters ...]"
