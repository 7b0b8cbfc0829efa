"""The aggregation reads a job's nodes from the store a page at a time: the report it
writes is the one the whole list of envelopes gives, and the reduce tree packs the same
groups from the streamed nodes as from the list."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from typing import Any

import httpx2
from doubles import MockGateway, completion, job_spec

from swarm.calls.runtime import Runtime
from swarm.jobs.aggregation import run_aggregation
from swarm.jobs.context_fit import fitting_window
from swarm.jobs.reduce import pack
from swarm.jobs.reduce_calls import _results_budget
from swarm.jobs.report import build_report
from swarm.jobs.subagent import run_node
from swarm.jobs.tally import complete_page, node_pages, result_tokens
from swarm.records import JobSpec, NodeEnvelope
from swarm.store import MemoryJobStore

MakeRuntime = Callable[..., tuple[Runtime, MockGateway]]


class PagedOnly(MemoryJobStore):
    """A store that records the size of each read of envelopes, and refuses whole reads."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[int] = []

    def envelopes(self, job_id: str) -> list[NodeEnvelope]:
        raise AssertionError("the aggregation read every envelope at once")

    def envelopes_of(self, job_id: str, node_ids: Sequence[str]) -> dict[str, NodeEnvelope]:
        self.reads.append(len(node_ids))
        return super().envelopes_of(job_id, node_ids)


def complete_nodes(spec: JobSpec, stored: Sequence[NodeEnvelope]) -> list[NodeEnvelope]:
    """One envelope per node in input order; a node with none stored becomes an error."""
    by_id = {env.node_id: env for env in stored}
    return complete_page(spec, zip(spec.node_ids, spec.input_refs, strict=True), by_id)


def _paged(rt: Runtime, page: int) -> tuple[Runtime, PagedOnly]:
    store = PagedOnly()
    settings = rt.settings.model_copy(update={"report_page_nodes": page})
    return dataclasses.replace(rt, store=store, settings=settings), store


def _mixed(body: dict[str, Any], n: int) -> httpx2.Response:
    """Every third sub-agent gets a 400; the others and the merge answer."""
    text = body["messages"][-1]["content"]
    if "sub-agents:" not in text and n % 3 == 0:
        return httpx2.Response(400, json={"error": {"message": "bad input"}})
    return completion(f"answer {n}", prompt=100, completion_tokens=20)


def test_node_pages_are_every_node_in_order_a_page_at_a_time(make_runtime: MakeRuntime) -> None:
    rt, store = _paged(make_runtime(_mixed)[0], page=3)
    spec = job_spec(10)
    store.create_job(spec, [f"def f{i}(): pass" for i in range(10)])
    for node in spec.node_ids[:7]:  # the last three never ran
        run_node(rt, "j1", node)
    pages = list(node_pages(store, spec, 3))
    assert [len(p) for p in pages] == [3, 3, 3, 1] and store.reads == [3, 3, 3, 1]
    nodes = [env for p in pages for env in p]
    assert [env.node_id for env in nodes] == list(spec.node_ids)
    assert all(env.error == "node did not run" for env in nodes[7:])


def test_a_paged_aggregation_writes_the_report_the_whole_envelopes_give(
    make_runtime: MakeRuntime,
) -> None:
    rt, store = _paged(make_runtime(_mixed)[0], page=4)
    spec = job_spec(11)
    store.create_job(spec, [f"def f{i}(): pass" for i in range(11)])
    for node in spec.node_ids[:10]:
        run_node(rt, "j1", node)
    report = run_aggregation(rt, "j1")
    assert report["status"] == "partial" and report["final"]
    assert store.reads and max(store.reads) <= 4
    whole = complete_nodes(spec, MemoryJobStore.envelopes(store, "j1"))
    expected = build_report(
        spec, whole, store.ledger("j1"), rt.catalog, status="partial", final=report["final"],
        wall_s=report["wall_s"], rate_limited=store.rate_limited("j1"), hedges=store.hedges("j1"),
    ).model_dump(mode="json")  # fmt: skip
    assert report == {k: v for k, v in expected.items() if k != "nodes"}
    assert (report["succeeded"], report["failed"], report["cancelled"]) == (7, 3, 1)
    assert report["failures_by_kind"] == {"bad_request": 3, "cancelled": 1}
    assert store.report_nodes("j1") == expected["nodes"]
    assert [n["node_id"] for n in store.report_nodes("j1", failed=True)] == [
        env.node_id for env in whole if not env.ok
    ]


def test_the_reduce_tree_packs_the_streamed_nodes_in_the_groups_of_the_whole_list(
    make_runtime: MakeRuntime,
) -> None:
    def handler(body: dict[str, Any], n: int) -> httpx2.Response:
        text = body["messages"][-1]["content"]
        if "sub-agents:" in text:
            return completion("merged", prompt=100, completion_tokens=20)
        return completion(f"finding{n} " * 150, prompt=100, completion_tokens=500)

    base, gw = make_runtime(handler)
    small = base.catalog.models["kimi-k2.5"].model_copy(
        update={"context_window": 4096, "max_tokens": 256}
    )
    models = {**base.catalog.models, "kimi-k2.5": small}
    catalog = base.catalog.model_copy(update={"models": models})
    rt, store = _paged(dataclasses.replace(base, catalog=catalog), page=3)
    spec = job_spec(12)
    store.create_job(spec, [f"def f{i}(): pass" for i in range(12)])
    for node in spec.node_ids:
        assert run_node(rt, "j1", node).ok
    ran = len(gw.requests)
    report = run_aggregation(rt, "j1")
    assert report["status"] == "succeeded" and max(store.reads) <= 3
    ok = complete_nodes(spec, MemoryJobStore.envelopes(store, "j1"))
    budget = _results_budget(spec, small, fitting_window(rt, small))
    groups = pack([result_tokens(env) for env in ok], budget)
    assert len(groups) > 1 and any(len(group) > 1 for group in groups)
    prompts = [req["messages"][-1]["content"] for req in gw.requests[ran:]]
    refs = [tuple(re.findall(r'input="([^"]*)"', prompt)) for prompt in prompts]
    level_one = sorted(refs[: len(groups)])  # level 1's calls end before the next level's
    assert level_one == sorted(tuple(ok[i].input_ref for i in group) for group in groups)
