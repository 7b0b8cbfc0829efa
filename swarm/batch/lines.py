"""A node's batch line: the exact request its live call would send, under its key.

The request is built as the sub-agent code builds the node's first call (swarm.jobs.subagent:
the instruction with its schema, the input as it fits the model's window, the job's
completion budget), so the line's ``custom_id`` (the request's idempotency key) is the key
a live call of the node looks its answer up under. A node whose input would need its middle
summarised gets no line (it runs live). The body is the live call's (its kind's request
fields: swarm.providers); fields the provider refuses in a batch body (catalog
``batch_refused_fields``) are left out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from swarm.batch.gateway import ENDPOINT
from swarm.calls.request import CallRequest
from swarm.calls.runtime import Runtime
from swarm.catalog import DEFAULT_KIND
from swarm.jobs.context_fit import fitting_window, input_budget_tokens, split_for_budget
from swarm.jobs.prompts import subagent_messages
from swarm.jobs.structured import schema_instruction
from swarm.records import JobSpec
from swarm.tokens import estimate_tokens


@dataclass(frozen=True)
class FileLines:
    """The lines of one batch file, and the nodes that get none."""

    requests: Mapping[str, CallRequest]
    """Node id -> the request its line carries."""
    live: tuple[str, ...]
    """Nodes whose input does not fit as it is (they run live)."""

    def by_key(self) -> dict[str, str]:
        """custom_id (idempotency key) -> node id."""
        return {request.key: node_id for node_id, request in self.requests.items()}

    def jsonl(self) -> bytes:
        """The file's content: one JSON line per request."""
        rows = [json.dumps(line_of(r), ensure_ascii=False) for r in self.requests.values()]
        return "".join(row + "\n" for row in rows).encode()


def node_request(rt: Runtime, spec: JobSpec, node_id: str, text: str) -> CallRequest | None:
    """The request of the node's first live call, or None when its input does not fit."""
    task = spec.task(node_id)
    model = rt.catalog.model(task.model)
    max_tokens = spec.max_tokens or model.max_tokens
    instruction = schema_instruction(task.instruction, task.output_schema)
    overhead = estimate_tokens(instruction) + estimate_tokens(spec.context or "") + 256
    budget = input_budget_tokens(fitting_window(rt, model), max_tokens, overhead)
    if split_for_budget(text, budget) is not None:
        return None
    messages = subagent_messages(instruction, spec.input_ref(node_id), text, spec.context)
    return CallRequest.of(
        spec.job_id,
        node_id,
        model,
        messages,
        max_tokens,
        budgeted=spec.budget_usd is not None,
        json_mode=task.output_schema is not None,
        kind=task.kind or DEFAULT_KIND,
    )


def file_lines(
    rt: Runtime, spec: JobSpec, node_ids: Sequence[str], texts: Mapping[str, str]
) -> FileLines:
    """The lines of ``node_ids`` (those whose input fits)."""
    built = {node_id: node_request(rt, spec, node_id, texts[node_id]) for node_id in node_ids}
    requests = {node_id: request for node_id, request in built.items() if request is not None}
    return FileLines(requests, tuple(node_id for node_id in node_ids if node_id not in requests))


def line_of(request: CallRequest) -> dict[str, Any]:
    """One JSONL line: ``custom_id`` = the request's key, the body without refused fields."""
    refused = set(request.model.batch_refused_fields)
    body = {name: value for name, value in request.body().items() if name not in refused}
    return {"custom_id": request.key, "method": "POST", "url": ENDPOINT, "body": body}
