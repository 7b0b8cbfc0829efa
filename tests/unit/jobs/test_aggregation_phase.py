"""The aggregation says what it does (the job's phase): each reduce level with a bound on
the levels left, then the final merge; `swarm status --watch` shows it."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any

import httpx2
import pytest
from doubles import MockGateway, completion, job_spec

from swarm.calls.runtime import Runtime
from swarm.jobs.aggregation import run_aggregation
from swarm.jobs.reduce import levels_after
from swarm.jobs.subagent import run_node

MakeRuntime = Callable[..., tuple[Runtime, MockGateway]]


@pytest.mark.parametrize(
    ("groups", "item", "budget", "cap", "levels"),
    [
        (1, 100, 1000, 6, 0),  # one result: nothing to reduce
        (5, 100, 1000, 6, 0),  # 500 tokens fit
        (20, 100, 1000, 6, 1),  # 2000 -> 3 groups -> 300 fit
        (200, 100, 1000, 6, 2),  # 200 -> 23 -> 3
        (200, 100, 1000, 1, 1),  # capped
    ],
)
def test_levels_after_is_an_upper_bound_of_the_levels_left(
    groups: int, item: int, budget: int, cap: int, levels: int
) -> None:
    assert levels_after(groups, item, budget, cap) == levels


def test_the_phase_names_each_reduce_level_then_the_final_merge(
    make_runtime: MakeRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    def handler(body: dict[str, Any], n: int) -> httpx2.Response:
        if "sub-agents:" in body["messages"][-1]["content"]:
            return completion("merged", prompt=100, completion_tokens=20)
        return completion("finding " * 500, prompt=100, completion_tokens=600)

    rt, _ = make_runtime(handler)
    small = rt.catalog.models["kimi-k2.5"].model_copy(
        update={"context_window": 4096, "max_tokens": 256}
    )
    models = {**rt.catalog.models, "kimi-k2.5": small}
    rt = dataclasses.replace(rt, catalog=rt.catalog.model_copy(update={"models": models}))
    rt.store.create_job(job_spec(20, job_id="j1"), [f"def f{i}(): pass" for i in range(20)])
    for node in rt.store.spec("j1").node_ids:
        assert run_node(rt, "j1", node).ok
    phases: list[str] = []
    keep = rt.store.set_phase
    monkeypatch.setattr(rt.store, "set_phase", lambda job, p: (phases.append(p), keep(job, p)))
    report = run_aggregation(rt, "j1")
    assert report["status"] == "succeeded"
    assert phases[0] == "aggregating"
    assert phases[1].startswith("reduce level 1 of at most ") and phases[1].endswith(" calls")
    assert re.fullmatch(r"final merge of \d+ results on kimi-k2\.5", phases[-1])
    assert rt.store.progress("j1").phase == phases[-1]
