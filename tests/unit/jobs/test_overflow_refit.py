"""A context-length 400 that states the window: the input is refitted and sent once more;
a summary of the same middle is made once per node, whichever model needs it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import httpx2
from doubles import MockGateway, completion, job_spec

from swarm.calls.runtime import Runtime
from swarm.jobs.aggregation import run_aggregation
from swarm.jobs.subagent import run_node

MakeRuntime = Callable[..., tuple[Runtime, MockGateway]]
WINDOW = 4096


def capped(rt: Runtime, max_tokens: int = 2048) -> Runtime:
    """``rt`` with kimi-k2.5's and gemini-2.5-flash's caps at ``max_tokens``: the packaged
    thinking caps (16,384 and 8,192) cannot fit the small server's window at all."""
    models = {
        name: spec.model_copy(update={"max_tokens": max_tokens})
        if name in ("kimi-k2.5", "gemini-2.5-flash")
        else spec
        for name, spec in rt.catalog.models.items()
    }
    return dataclasses.replace(rt, catalog=rt.catalog.model_copy(update={"models": models}))


def server_tokens(body: dict[str, Any]) -> int:
    """A tokenizer denser than the offline estimate: 3 characters per token."""
    return sum(len(m["content"]) for m in body["messages"]) // 3 + body.get("max_tokens", 0)


def small_server(body: dict[str, Any], n: int) -> httpx2.Response:
    if body["model"] == "gemini-2.5-flash":
        return completion("the middle, summarised", prompt=100, completion_tokens=10)
    asked = server_tokens(body)
    if asked > WINDOW:
        message = (
            f"This model's maximum context length is {WINDOW} tokens. However, you requested "
            f"{asked} tokens. Please reduce the length of the messages or completion."
        )
        return httpx2.Response(400, json={"error": {"message": message, "code": None}})
    return completion("reviewed", prompt=asked - body["max_tokens"], completion_tokens=20)


def test_an_overflow_stating_the_window_is_refitted_and_not_counted(
    make_runtime: MakeRuntime,
) -> None:
    rt, gw = make_runtime(small_server)
    rt = capped(rt)
    rt.store.create_job(job_spec(1, job_id="j1"), ["x = compute(y)\n" * 700])  # ~10 KB
    envelope = run_node(rt, "j1", "n00")
    assert envelope.ok and envelope.content == "reviewed"
    assert envelope.truncation is not None and envelope.truncation.summary_chars > 0
    assert rt.windows.window("kimi-k2.5", 262_144) == WINDOW
    kimi = [r for r in gw.requests if r["model"] == "kimi-k2.5"]
    assert len(kimi) == 2 and server_tokens(kimi[-1]) <= WINDOW
    ledger = rt.store.ledger("j1")
    assert ledger["kimi-k2.5"].calls == 1  # the refused request was not billed
    assert envelope.attempts == 2  # the summary and the refitted call; not the 400
    again = make_runtime(small_server)[1]  # a fresh gateway: the learned window is reused
    rt2 = dataclasses.replace(rt, client=again.client())
    rt2.store.create_job(job_spec(1, job_id="j2"), ["x = compute(y)\n" * 700])
    assert run_node(rt2, "j2", "n00").ok
    assert len([r for r in again.requests if r["model"] == "kimi-k2.5"]) == 1


def test_a_fallback_model_reuses_the_summary_of_the_same_middle(
    make_runtime: MakeRuntime,
) -> None:
    def handler(body: dict[str, Any], n: int) -> httpx2.Response:
        if body["model"] == "gemini-2.5-flash":
            return completion("the middle, summarised", prompt=100, completion_tokens=10)
        if body["model"] == "kimi-k2.5":
            return httpx2.Response(503, json={"error": {"message": "overloaded"}})
        return completion("reviewed by the fallback", prompt=900, completion_tokens=20)

    rt, gw = make_runtime(handler)
    small = {"context_window": 2048, "max_tokens": 256}
    models = {
        name: spec.model_copy(update=small) if name in ("kimi-k2.5", "claude-sonnet-4.5") else spec
        for name, spec in rt.catalog.models.items()
    }
    rt = dataclasses.replace(rt, catalog=rt.catalog.model_copy(update={"models": models}))
    spec = job_spec(1, fallback_models=("claude-sonnet-4.5",))
    rt.store.create_job(spec, ["line of a long diff\n" * 1000])  # ~20 KB
    envelope = run_node(rt, "j1", "n00")
    assert envelope.ok and envelope.model == "claude-sonnet-4.5"
    summaries = [r for r in gw.requests if r["model"] == "gemini-2.5-flash"]
    assert len(summaries) == 1
    assert rt.store.ledger("j1")["gemini-2.5-flash"].calls == 1


def test_a_summariser_that_overflows_is_refitted_to_its_stated_window(
    make_runtime: MakeRuntime,
) -> None:
    def every_model_small(body: dict[str, Any], n: int) -> httpx2.Response:
        asked = server_tokens(body)
        if asked > WINDOW:
            message = (
                f"This model's maximum context length is {WINDOW} tokens. However, you "
                f"requested {asked} tokens. Please reduce the length of the messages."
            )
            return httpx2.Response(400, json={"error": {"message": message, "code": None}})
        if body["model"] == "gemini-2.5-flash":
            return completion("the middle, summarised", prompt=asked, completion_tokens=10)
        return completion("reviewed", prompt=asked - body["max_tokens"], completion_tokens=20)

    rt, gw = make_runtime(every_model_small)
    rt = capped(rt)
    rt.store.create_job(job_spec(1, job_id="j1"), ["x = compute(y)\n" * 2000])  # ~30 KB
    envelope = run_node(rt, "j1", "n00")
    assert envelope.ok and envelope.truncation is not None
    assert envelope.truncation.summary_chars > 0  # not "[summary unavailable]"
    summaries = [r for r in gw.requests if r["model"] == "gemini-2.5-flash"]
    assert len(summaries) == 2 and server_tokens(summaries[-1]) <= WINDOW
    assert rt.windows.window("gemini-2.5-flash", 1_048_576) == WINDOW
    assert rt.store.ledger("j1")["gemini-2.5-flash"].calls == 1  # the 400 was not billed


def test_an_aggregation_that_overflows_is_merged_again_for_the_stated_window(
    make_runtime: MakeRuntime,
) -> None:
    def handler(body: dict[str, Any], n: int) -> httpx2.Response:
        asked = server_tokens(body)
        if asked > WINDOW:
            message = (
                f"This model's maximum context length is {WINDOW} tokens. However, you "
                f"requested {asked} tokens. Please reduce the length of the messages."
            )
            return httpx2.Response(400, json={"error": {"message": message, "code": None}})
        prompt = asked - body["max_tokens"]
        if "sub-agents:" in body["messages"][-1]["content"]:  # a merge or a reduction
            return completion("merged", prompt=prompt, completion_tokens=20)
        # each sub-agent answers at length: 20 of them overflow a 4096-token merge
        return completion("finding " * 500, prompt=prompt, completion_tokens=600)

    rt, gw = make_runtime(handler)
    rt = capped(rt)
    rt.store.create_job(job_spec(20, job_id="j1"), [f"def f{i}(): pass" for i in range(20)])
    for node in rt.store.spec("j1").node_ids:
        assert run_node(rt, "j1", node).ok
    report = run_aggregation(rt, "j1")
    assert report["status"] == "succeeded" and report["final"] == "merged"
    assert rt.windows.window("kimi-k2.5", 262_144) == WINDOW
    refused = [r for r in gw.requests if server_tokens(r) > WINDOW]
    assert len(refused) == 1  # the first merge; the reductions and the merge fit
    assert report["models"]["kimi-k2.5"]["calls"] == len(gw.requests) - 1  # 400 not billed
