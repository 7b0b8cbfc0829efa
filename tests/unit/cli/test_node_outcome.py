"""`swarm status JOB --node N` of a node without tools: its outcome, the error naming the
URL its call went to (an agent node shows its transcript, as before)."""

from __future__ import annotations

import json

import pytest
from doubles import job_spec

from swarm.cli.transcript_view import print_transcript
from swarm.errors import InputError
from swarm.records import ErrorKind, NodeEnvelope
from swarm.store import MemoryJobStore

ERROR = "APIConnectionError: Connection error. (calling http://127.0.0.1:9/v1/chat/completions)"


def failed_job() -> MemoryJobStore:
    store = MemoryJobStore()
    store.create_job(job_spec(2), ["a", "b"])
    store.finish_node("j1", NodeEnvelope(
        node_id="n00", input_ref="f0", model="kimi-k2.5", status="error", attempts=3,
        latency_ms=812, error_kind=ErrorKind.CONNECTION, error=ERROR,
    ))  # fmt: skip
    return store


def test_a_failed_nodes_outcome_names_the_url(capsys: pytest.CaptureFixture[str]) -> None:
    print_transcript(failed_job(), "j1", "n00", as_json=False)
    assert capsys.readouterr().out.splitlines() == [
        "node n00: connection on kimi-k2.5, 3 attempts, 812 ms",
        f"error: {ERROR}",
    ]
    print_transcript(failed_job(), "j1", "n00", as_json=True)
    shown = json.loads(capsys.readouterr().out)
    assert shown["error"] == ERROR and "content" not in shown


def test_a_node_not_ended_is_said() -> None:
    with pytest.raises(InputError, match="node 'n01' of job j1 has not ended"):
        print_transcript(failed_job(), "j1", "n01", as_json=False)
