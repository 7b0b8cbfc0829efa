"""A job's nodes without a task of their own share the job's task, built once per spec."""

from __future__ import annotations

import time

from swarm.records import JobSpec, NodeTask


def spec(**fields: object) -> JobSpec:
    return JobSpec(
        job_id="j1",
        instruction="find bugs",
        aggregate_instruction="merge",
        model="kimi-k2.5",
        aggregate_model="kimi-k2.5",
        node_ids=("n0", "n1", "n2"),
        input_refs=("a.py", "b.py", "c.py"),
        submitted_at=time.time(),
        **fields,  # type: ignore[arg-type]
    )


def test_nodes_without_a_task_of_their_own_share_the_jobs_task() -> None:
    job = spec(kind="review", fallback_models=("glm-4.6",))
    first = job.task("n0")
    assert first is job.task("n1") is job.task("n0")
    assert first == NodeTask(model="kimi-k2.5", instruction="find bugs", kind="review",
                             fallback_models=("glm-4.6",))  # fmt: skip


def test_a_nodes_own_task_comes_first() -> None:
    own = NodeTask(model="glm-4.6", instruction="summarise")
    job = spec(tasks={"n1": own})
    assert job.task("n1") == own
    assert job.task("n0").model == "kimi-k2.5"


def test_a_copy_with_other_fields_gets_its_own_task() -> None:
    job = spec()
    job.task("n0")
    copy = job.model_copy(update={"model": "glm-4.6", "instruction": "summarise"})
    assert copy.task("n0").model == "glm-4.6"
    assert copy.task("n0").instruction == "summarise"
    assert job.task("n0").model == "kimi-k2.5"
