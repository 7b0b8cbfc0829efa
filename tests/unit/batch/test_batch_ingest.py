"""Output lines become billed calls and stored answers, each counted once."""

from __future__ import annotations

from typing import Any

from doubles import job_spec

from swarm.batch.ingest import record_output
from swarm.calls.runtime import Runtime
from swarm.records import Usage


def line(custom_id: str, status: int = 200, content: str | None = "answer") -> dict[str, Any]:
    body = {
        "choices": [{"message": {"content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5,
                  "prompt_tokens_details": {"cached_tokens": 2}},
    }  # fmt: skip
    return {"custom_id": custom_id, "response": {"status_code": status, "body": body}}


def test_answered_lines_are_billed_once_and_stored_under_their_key(make_runtime: Any) -> None:
    rt: Runtime = make_runtime(lambda body, n: None)[0]
    spec = job_spec(3, job_id="j")
    rt.store.create_job(spec, ["a", "b", "c"])
    model = rt.catalog.model("kimi-k2.5")
    rows = [line("k1"), line("k2", status=500), line("unknown"), line("k3", content=None)]
    keys = {"k1": "n1", "k2": "n2", "k3": "n3"}
    assert record_output(rt, "j", model, "batch_1", rows, keys) == {"n1"}
    assert record_output(rt, "j", model, "batch_1", rows, keys) == {"n1"}  # again: once
    ledger = rt.store.ledger("j")["kimi-k2.5|batch"]
    assert ledger.calls == 2  # k1 and k3 (billed, no text); the 500 and the unknown are not
    assert ledger.usage == Usage(prompt_tokens=20, completion_tokens=10, cached_tokens=4)
    stored = rt.store.answer("j", "k1")
    assert stored is not None and stored.via == "batch" and stored.content == "answer"
    assert rt.store.answer("j", "k3") is None
