"""The simulated Batch API's records: its counters, files, request lines and batches."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class BatchStats:
    """Counters of the Batch API (``batch`` in GET /stats).

    ``lines_served``: lines answered in output files; ``lines_billed``: the same, the ones
    the gateway charges (at ``discount`` of the live price); ``lines_failed``: lines in
    error files; tokens: summed over billed lines only."""

    discount: float = 0.5
    files_uploaded: int = 0
    batches_created: int = 0
    batches_cancelled: int = 0
    batches_expired: int = 0
    batches_failed: int = 0
    lines_received: int = 0
    lines_served: int = 0
    lines_billed: int = 0
    lines_failed: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def snapshot(self) -> dict[str, Any]:
        """The counters as JSON."""
        return dict(self.__dict__)

    def reset(self) -> None:
        """Zero the counters (the discount stays)."""
        self.__init__(discount=self.discount)  # type: ignore[misc]


@dataclass
class SimFile:
    """An uploaded or produced file."""

    id: str
    filename: str
    purpose: str
    data: bytes
    created_at: int = field(default_factory=lambda: int(time.time()))

    def body(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "file",
            "bytes": len(self.data),
            "created_at": self.created_at,
            "filename": self.filename,
            "purpose": self.purpose,
            "status": "processed",
        }


@dataclass
class Line:
    """One request line of a batch: its custom id and parsed body, or why it fails."""

    custom_id: str
    body: dict[str, Any]
    refusal: str | None = None


@dataclass
class SimBatch:
    """One batch; its times are ``time.time()`` values."""

    id: str
    input_file_id: str
    completion_window: str
    metadata: dict[str, str] | None
    created: float
    expires: float
    lines: list[Line]
    errors: list[dict[str, Any]]
    cancel_at: float | None = None
    ended_status: str | None = None
    ended_at: float | None = None
    output_file_id: str | None = None
    error_file_id: str | None = None
    done_lines: int = 0
    failed_lines: int = 0
