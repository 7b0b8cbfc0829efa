"""On real workers: each kind's model on its own queue, and the planner's chord."""

from __future__ import annotations

import re
import time

from stack import Stack, Worker, stack_fixture

from swarm.records import InputItem, NodeTask

FAST = "llm.gemini-2.5-flash,llm.deepseek-v3.2"
MAIN = "llm.kimi-k2.5,llm.claude-sonnet-4.5,llm.gpt-4.1"


stack = stack_fixture(["--latency-ms", "20"], Worker("fast", FAST, c=8), Worker("main", MAIN, c=8))


def ran_on(stack: Stack, task_id: str) -> str:
    """The worker whose log says the task succeeded. Celery logs that line after it stores
    the result, so a finished report can come before it: wait for the line."""
    pattern = rf"Task swarm\.\w+\[{re.escape(task_id)}\] succeeded"
    deadline = time.monotonic() + 30
    while True:
        hosts = [w.log_path.stem for w in stack.workers if re.search(pattern, w.log_text())]
        if hosts or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert len(hosts) == 1, (task_id, hosts)
    return hosts[0]


def test_each_kind_runs_on_its_models_queue(stack: Stack) -> None:
    catalog = stack.client().catalog
    kinds = ["extract", "code", "summarize", "reason", "default"]
    tasks = [NodeTask(model=catalog.routing[k][0], instruction=f"do {k}", kind=k) for k in kinds]
    items = [InputItem(ref=f"in-{k}", text=f"input for {k}") for k in kinds]
    handle = stack.client().submit(items, "unused", tasks=tasks)
    report = handle.wait(timeout=60).to_dict()
    assert report["status"] == "succeeded"
    expected = {
        "extract": "fast",
        "summarize": "fast",
        "code": "main",
        "reason": "main",
        "default": "main",
    }
    for node in report["nodes"]:
        assert node["model"] == catalog.routing[node["kind"]][0]
        worker = ran_on(stack, f"{handle.id}-{node['node_id']}")
        assert worker.startswith(f"celery-{expected[node['kind']]}"), (node["kind"], worker)
    assert set(report["models"]) == {catalog.routing[k][0] for k in kinds} | {"kimi-k2.5"}


def test_planned_job_plans_on_a_worker_then_fans_out(stack: Stack) -> None:
    stack.reset_stats()
    docs = [InputItem(ref=f"paper{i}.md", text=f"# Paper {i}\nresult {i}") for i in range(4)]
    handle = stack.client().plan(docs, "Which result is best?")
    report = handle.wait(timeout=60).to_dict()
    assert report["status"] == "succeeded", report.get("error")
    assert sorted(n["input_ref"] for n in report["nodes"]) == sorted(d.ref for d in docs)
    assert all(n["kind"] for n in report["nodes"])
    stats = stack.stats()
    calls = sum(m["calls"] for m in report["models"].values())
    assert calls == stats["completed"] == len(docs) + 2  # planner + nodes + aggregation
    assert report["usage"]["prompt_tokens"] == stats["prompt_tokens"]
    assert ran_on(stack, f"{handle.id}-plan").startswith("celery-main")
