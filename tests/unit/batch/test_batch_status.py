"""What `swarm status` prints of a job's batches and deadline."""

from __future__ import annotations

from doubles import job_spec

from swarm.batch.status import deadline_line, status_json, status_lines
from swarm.store.batches import FileState


def test_a_job_without_deadline_or_batches_prints_nothing_more() -> None:
    assert status_lines(job_spec(2), []) == []


def test_deadline_and_batch_progress_one_line_each() -> None:
    spec = job_spec(3, deadline_at=1_800_000_000.0)
    files = [
        FileState(index=0, model="kimi-k2.5", node_ids=("n00", "n01"), batch_id="batch_1",
                  status="in_progress", total=2, completed=1),
        FileState(index=1, model="gpt-4.1", node_ids=("n02",)),
    ]  # fmt: skip
    lines = status_lines(spec, files)
    assert lines[0].startswith("deadline 2027-01-15 08:00:00 UTC (")
    assert lines[1] == "batch file 0 (kimi-k2.5, 2 nodes): batch_1 in_progress, 1/2 done, 0 failed"
    assert lines[2] == "batch file 1 (gpt-4.1, 1 nodes): planned"
    assert deadline_line(spec, now=1_800_000_000.0 - 1800) == (
        "deadline 2027-01-15 08:00:00 UTC (in 30 min)"
    )
    assert status_json(spec, files)["batches"][0]["completed"] == 1


def test_a_file_that_ran_live_says_why() -> None:
    refused = "the gateway refused the batch (404 not found)"
    state = FileState(index=0, model="kimi-k2.5", node_ids=("n00",), status="live", ended=True,
                      live_nodes=1, error=refused)  # fmt: skip
    assert status_lines(job_spec(1), [state]) == [
        "batch file 0 (kimi-k2.5, 1 nodes): no batch live, 1 live (ended); the gateway refused "
        "the batch (404 not found)"
    ]
