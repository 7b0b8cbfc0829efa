"""A batch's output lines recorded as the nodes' billed calls and stored answers.

Each answered line is recorded through the job store's ``record_call``, the same atomic
write as a live answer (ledger line, spent budget, the answer under its idempotency key, the
line's ``custom_id``), at the batch price under the ledger model ``<model>|batch``. Its call
id is derived from the batch and the line, so a poll that records the same output twice
(a worker killed mid-way) counts each line once; an answer already stored under the key (a
live call of the node got there first) is kept and the line is only billed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from swarm.calls import usage as usage_formats
from swarm.calls.runtime import Runtime
from swarm.catalog import ModelSpec
from swarm.cost.batch import batch_cost_nusd, batch_ledger_name
from swarm.records import Usage
from swarm.store.billing import BilledCall, StoredAnswer

log = logging.getLogger(__name__)


def answer_of(body: Mapping[str, Any], usage: Usage | None) -> StoredAnswer | None:
    """The stored answer of a chat completion body (None without a text)."""
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None
    message = choices[0].get("message") or {}
    content = message.get("content")
    if not isinstance(content, str):
        return None
    return StoredAnswer(
        content=content,
        usage=usage or Usage(),
        finish_reason=choices[0].get("finish_reason"),
        usage_missing=usage is None,
        via="batch",
    )


def record_output(
    rt: Runtime,
    job_id: str,
    model: ModelSpec,
    batch_id: str,
    rows: Iterable[Mapping[str, Any]],
    keys: Mapping[str, str],
) -> set[str]:
    """Record the answered lines of an output file; the nodes (of ``keys``: custom_id ->
    node id) whose line was answered."""
    answered: set[str] = set()
    for row in rows:
        custom_id = str(row.get("custom_id"))
        response = row.get("response") or {}
        body = response.get("body") if response.get("status_code") == 200 else None
        if custom_id not in keys or not isinstance(body, dict):
            continue
        raw_usage = body.get("usage")
        usage = usage_formats.usage_of(raw_usage) if isinstance(raw_usage, dict) else None
        answer = answer_of(body, usage)
        billed = BilledCall(
            call_id=f"batch:{batch_id}:{custom_id}",
            model=batch_ledger_name(model.name),
            usage=usage or Usage(),
            cost_nusd=batch_cost_nusd(model, usage or Usage()),
            answer_key=custom_id if answer is not None else None,
            answer=answer,
        )
        rt.store.record_call(job_id, billed)
        if answer is not None:
            answered.add(keys[custom_id])
    log.debug("batch %s: %d answered lines recorded for job %s", batch_id, len(answered), job_id)
    return answered
