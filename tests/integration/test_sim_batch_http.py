"""The simulator's Batch API over real HTTP, driven by the official openai SDK."""

from __future__ import annotations

import io
import json
import time
from typing import Any

import openai
import pytest

from swarm.sim import SimConfig, start_in_thread
from swarm.sim.batch_config import BatchSimConfig

pytestmark = pytest.mark.integration

MODEL = "kimi-k2.5"
WAIT_S = 60.0
"""A generous deadline for a state the simulator reaches (never a timing bound)."""


def _lines(n: int, model: str = MODEL, **extra: Any) -> bytes:
    rows = [
        {
            "custom_id": f"job:n{i:04d}",
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {
                "model": model,
                "messages": [{"role": "user", "content": f"input {i}"}],
                "max_tokens": 64,
                **extra,
            },
        }
        for i in range(n)
    ]
    return "".join(json.dumps(row) + "\n" for row in rows).encode()


def _client(base_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url, api_key="test", max_retries=0, timeout=WAIT_S)


def _submit(client: openai.OpenAI, data: bytes, **metadata: str) -> Any:
    uploaded = client.files.create(file=("in.jsonl", io.BytesIO(data)), purpose="batch")
    return client.batches.create(
        input_file_id=uploaded.id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
        metadata=metadata or None,
    )


def _until_ended(client: openai.OpenAI, batch_id: str) -> Any:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        batch = client.batches.retrieve(batch_id)
        if batch.status in {"completed", "failed", "expired", "cancelled"}:
            return batch
        time.sleep(0.05)
    raise AssertionError(f"batch {batch_id} did not end within {WAIT_S} s")


def _jsonl(client: openai.OpenAI, file_id: str | None) -> list[dict[str, Any]]:
    if file_id is None:
        return []
    text = client.files.content(file_id).text
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_batch_completes_with_answers_and_billing() -> None:
    config = SimConfig(batch=BatchSimConfig(processing_s=0.3))
    with start_in_thread(config) as sim, _client(sim.base_url) as client:
        batch = _submit(client, _lines(5), swarm_job="j1", swarm_file="0")
        assert batch.status in {"validating", "in_progress"}
        ended = _until_ended(client, batch.id)
        assert ended.status == "completed"
        assert ended.request_counts is not None
        assert (ended.request_counts.total, ended.request_counts.completed) == (5, 5)
        output = _jsonl(client, ended.output_file_id)
        assert sorted(row["custom_id"] for row in output) == [f"job:n{i:04d}" for i in range(5)]
        answer = output[0]["response"]["body"]
        assert answer["choices"][0]["message"]["content"].startswith(f"sim:{MODEL}:")
        stats = sim.stats()
        billed = sum(row["response"]["body"]["usage"]["completion_tokens"] for row in output)
        assert stats["batch"]["lines_billed"] == 5
        assert stats["batch"]["completion_tokens"] == billed
        assert stats["batch"]["batches_created"] == 1
        assert stats["completed"] == 0  # the live counters do not count batch lines


def test_batch_is_found_by_its_metadata_in_the_list() -> None:
    with start_in_thread(SimConfig()) as sim, _client(sim.base_url) as client:
        for index in range(3):
            _submit(client, _lines(1), swarm_job="j2", swarm_file=str(index))
        found = [
            b.id
            for b in client.batches.list(limit=2)
            if b.metadata and b.metadata.get("swarm_file") == "0"
        ]
        assert len(found) == 1
        assert client.batches.retrieve(found[0]).metadata == {"swarm_job": "j2", "swarm_file": "0"}


def test_cancel_bills_only_the_lines_done() -> None:
    config = SimConfig(batch=BatchSimConfig(processing_s=30.0))
    with start_in_thread(config) as sim, _client(sim.base_url) as client:
        batch = _submit(client, _lines(4))
        cancelled = client.batches.cancel(batch.id)
        assert cancelled.status in {"cancelling", "cancelled"}
        ended = _until_ended(client, batch.id)
        assert ended.status == "cancelled"
        errors = _jsonl(client, ended.error_file_id)
        output = _jsonl(client, ended.output_file_id)
        assert len(errors) + len(output) == 4
        assert sim.stats()["batch"]["lines_billed"] == len(output)
        with pytest.raises(openai.ConflictError):
            client.batches.cancel(batch.id)


def test_failed_lines_and_refused_fields_go_to_the_error_file() -> None:
    batch_config = BatchSimConfig(processing_s=0.0, failed_rate=0.3, refused_fields=("top_p",))
    with start_in_thread(SimConfig(batch=batch_config)) as sim, _client(sim.base_url) as client:
        ended = _until_ended(client, _submit(client, _lines(40)).id)
        output, errors = _jsonl(client, ended.output_file_id), _jsonl(client, ended.error_file_id)
        assert ended.status == "completed"
        assert 0 < len(errors) < 40 and len(output) + len(errors) == 40
        assert {row["response"]["status_code"] for row in errors} == {500}
        refused = _until_ended(client, _submit(client, _lines(2, top_p=0.5)).id)
        statuses = {row["response"]["status_code"] for row in _jsonl(client, refused.error_file_id)}
        assert statuses == {400}
        assert sim.stats()["batch"]["lines_billed"] == len(output)


def test_expired_batch_answers_what_it_did() -> None:
    config = SimConfig(batch=BatchSimConfig(processing_s=20.0, expire_s=1.0))
    with start_in_thread(config) as sim, _client(sim.base_url) as client:
        ended = _until_ended(client, _submit(client, _lines(40)).id)
        assert ended.status == "expired"
        output, errors = _jsonl(client, ended.output_file_id), _jsonl(client, ended.error_file_id)
        assert len(output) + len(errors) == 40 and len(errors) > 0
        assert {row["error"]["code"] for row in errors} == {"batch_expired"}
        assert sim.stats()["batch"]["lines_billed"] == len(output)


def test_invalid_file_fails_validation() -> None:
    config = SimConfig(batch=BatchSimConfig(one_model=True))
    with start_in_thread(config) as sim, _client(sim.base_url) as client:
        mixed = _lines(1) + _lines(1, model="gpt-4.1").replace(b"n0000", b"n0001")
        ended = _until_ended(client, _submit(client, mixed).id)
        assert ended.status == "failed"
        assert ended.errors is not None and ended.errors.data
        assert ended.errors.data[0].code == "mixed_models"


def test_gateway_without_batch_answers_404() -> None:
    config = SimConfig(batch=BatchSimConfig(enabled=False))
    with (
        start_in_thread(config) as sim,
        _client(sim.base_url) as client,
        pytest.raises(openai.NotFoundError),
    ):
        client.files.create(file=("in.jsonl", io.BytesIO(_lines(1))), purpose="batch")
