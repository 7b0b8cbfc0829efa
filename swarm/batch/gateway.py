"""The gateway's Batch API through the openai SDK: find, create, read, cancel, download.

A batch carries its job and file in its metadata (``swarm_job``, ``swarm_file``), so a run
that created a batch and died before storing its id is found again by listing the gateway's
batches (newest first, back to the job's submission) before any new batch is created.
"""

from __future__ import annotations

import io
import json
import logging
from dataclasses import dataclass
from typing import Any, Final

import openai

log = logging.getLogger(__name__)
ENDPOINT: Final = "/v1/chat/completions"
COMPLETION_WINDOW: Final = "24h"
LIST_PAGE = 100
CLOCK_SLACK_S = 300.0
"""Batches created this long before the job's submission are still looked at (clocks)."""
SDK_RETRIES = 2
"""The SDK's own retries for these calls (a poll that fails is simply tried again later)."""


@dataclass(frozen=True)
class BatchView:
    """What a batch's status says."""

    id: str
    status: str
    total: int = 0
    completed: int = 0
    failed: int = 0
    output_file_id: str | None = None
    error_file_id: str | None = None
    error: str | None = None
    """The first validation error of a failed batch (one line)."""
    created_at: float | None = None
    """When the batch was created, its file uploaded (epoch seconds; a line's trace span
    starts there)."""


def view_of(batch: Any) -> BatchView:
    """A BatchView of an SDK Batch object."""
    counts = batch.request_counts
    errors = getattr(batch, "errors", None)
    data = getattr(errors, "data", None) or []
    first = data[0] if data else None
    error = f"{first.code}: {first.message}" if first is not None else None
    created = getattr(batch, "created_at", None)
    return BatchView(
        id=batch.id,
        status=batch.status,
        total=counts.total if counts else 0,
        completed=counts.completed if counts else 0,
        failed=counts.failed if counts else 0,
        output_file_id=batch.output_file_id,
        error_file_id=batch.error_file_id,
        error=error,
        created_at=float(created) if isinstance(created, int | float) else None,
    )


def metadata(job_id: str, index: int) -> dict[str, str]:
    """The metadata a job's batch file is created with (and found by)."""
    return {"swarm_job": job_id, "swarm_file": str(index)}


class BatchGateway:
    """The Batch API of one gateway (an openai client)."""

    def __init__(self, client: openai.OpenAI) -> None:
        self._client = client.with_options(max_retries=SDK_RETRIES)

    def find(self, job_id: str, index: int, since: float) -> BatchView | None:
        """The batch created for the job's file ``index``, if any (newest first, back to
        ``since`` minus the clock slack)."""
        wanted = metadata(job_id, index)
        for batch in self._client.batches.list(limit=LIST_PAGE):
            if batch.created_at < since - CLOCK_SLACK_S:
                return None
            found = batch.metadata or {}
            if all(found.get(k) == v for k, v in wanted.items()):
                log.debug("batch: found %s for job %s file %d by its metadata", batch.id,
                          job_id, index)  # fmt: skip
                return view_of(batch)
        return None

    def create(self, job_id: str, index: int, content: bytes) -> BatchView:
        """Upload ``content`` (JSONL) and create its batch."""
        name = f"swarm-{job_id}-{index}.jsonl"
        uploaded = self._client.files.create(file=(name, io.BytesIO(content)), purpose="batch")
        batch = self._client.batches.create(
            input_file_id=uploaded.id,
            endpoint=ENDPOINT,
            completion_window=COMPLETION_WINDOW,
            metadata=metadata(job_id, index),
        )
        return view_of(batch)

    def retrieve(self, batch_id: str) -> BatchView:
        """The batch's current status."""
        return view_of(self._client.batches.retrieve(batch_id))

    def cancel(self, batch_id: str) -> BatchView:
        """Ask the gateway to cancel the batch; its status (a batch already ended answers
        409: its status is read instead)."""
        try:
            return view_of(self._client.batches.cancel(batch_id))
        except openai.ConflictError:
            return self.retrieve(batch_id)

    def lines(self, file_id: str | None) -> list[dict[str, Any]]:
        """The JSON lines of an output or error file (none for no file)."""
        if file_id is None:
            return []
        text = self._client.files.content(file_id).text
        return [json.loads(row) for row in text.splitlines() if row.strip()]
