"""Hostile input, secrets and a soak: bad input, secrets and a 500-call soak, on one
deployment: a password-protected `redis-server` reached as ``redis://:pw@host:port/0``, the
simulator requiring the API key, and one `celery -A workers worker` serving two queues (Kimi's
and DeepSeek's; nobody serves Gemini's, so a job routed there stays queued for inspection).
"""

from __future__ import annotations

import json
import os
import re
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kombu
import procs
import pytest
from faults import FaultStack, inputs, roomy_catalog, rss_mib, wait_until
from stack import Worker, running_stack
from test_stack_e2e import _redis_dump as redis_dump
from test_swarm_e2e import run_cli

from swarm.client import SwarmClient
from swarm.errors import BrokerUnavailableError, InputError, UnknownModelError
from swarm.records import InputItem
from swarm.settings import Settings
from swarm.store.redis import LEASE_INDEX

pytestmark = pytest.mark.integration

KEY = "sk-hostile-" + os.urandom(8).hex()
PASSWORD = "pw-" + os.urandom(8).hex()
SERVED = "llm.kimi-k2.5,llm.deepseek-v3.2"


@pytest.fixture(scope="module")
def fs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultStack]:
    logs = tmp_path_factory.mktemp("hostile")
    try:
        srv = procs.RedisServer(password=PASSWORD, log_dir=logs)
    except (FileNotFoundError, procs.ProcError) as exc:
        procs.unavailable(f"cannot start a private redis-server: {exc}")
    assert srv.url.startswith(f"redis://:{PASSWORD}@127.0.0.1:")
    env = {
        "SWARM_API_KEY": KEY,
        "SWARM_MAX_ATTEMPTS": "3",
        "SWARM_BACKOFF_MAX_S": "0.2",
        "SWARM_CONFIG": str(roomy_catalog(logs / "catalog.toml")),
    }
    sim_args = ["--api-key", KEY, "--latency-p50-ms", "20", "--latency-p99-ms", "50"]
    try:
        with running_stack(srv, logs, sim_args, [Worker("w1", SERVED)], env) as st:
            yield FaultStack(st, {**st.env, **env}, logs)
    finally:
        srv.close()


@pytest.fixture(scope="module")
def soak(fs: FaultStack) -> dict[str, Any]:
    """Five 100-node jobs (500 calls) after a warm-up job; RSS of the worker around them."""
    client = fs.client()
    worker = fs.stack.workers[0]
    assert (
        client.submit(inputs(20, "warm-up"), "Summarise").wait(timeout=60).to_dict()["succeeded"]
        == 20
    )
    fs.stack.reset_stats()
    rss_start = rss_mib(worker.pid)
    handles = [client.submit(inputs(100, f"soak {j}"), "Summarise") for j in range(5)]
    reports = [h.wait(timeout=120).to_dict() for h in handles]
    return {
        "reports": reports,
        "rss": (rss_start, rss_mib(worker.pid)),
        "stats": fs.stack.stats(),
    }


def test_500_calls_nothing_lost_worker_rss_flat_every_key_expires(
    fs: FaultStack, soak: dict[str, Any]
) -> None:
    reports, stats = soak["reports"], soak["stats"]
    for report in reports:  # every node accounted for
        assert report["status"] == "succeeded", report.get("error")
        assert (report["total"], report["succeeded"], len(report["nodes"])) == (100, 100, 100)
    assert stats["completed"] == 505 == sum(r["models"]["kimi-k2.5"]["calls"] for r in reports)
    start, end = soak["rss"]
    assert end - start < 64, (start, end)  # flat: no per-call growth (~0.1 MiB/call would show)
    # The lapse index lists the task leases still out; the last tasks' leases go once
    # Celery has stored their results, just after the reports (a member left behind would
    # never go: this times out).
    wait_until(lambda: lapse_index_size(fs) == 0, 30.0, "the last task leases' release")
    # Nothing of a job is kept forever: every key but the broker's bindings and queue
    # bookkeeping and one admission state per model has a TTL (the job store, Celery's
    # results and chord state, admission leases and buckets).
    for db in (0, 1):
        r = fs.stack_redis(db)
        try:
            forever = [k for k in r.scan_iter(count=1000) if r.ttl(k) == -1]
        finally:
            r.close()
        bounded = [k for k in forever if re.fullmatch(r"\{llm:\w+:[\w.:-]+\}:state", k)]
        catalog = fs.client().catalog  # one state per model and per backend
        assert len(bounded) <= len(catalog.models) + len(catalog.backends)
        rest = set(forever) - set(bounded)
        assert all(k.startswith(("_kombu.", "unacked", "llm.")) for k in rest), rest
    print(
        f"\nFIGURE soak-500: jobs=5 calls={stats['completed']} "
        f"worker_rss_mib={start:.0f}->{end:.0f}"
    )


def lapse_index_size(fs: FaultStack) -> int:
    """Members of the task-lease lapse index, in both databases of the stack's Redis."""
    total = 0
    for db in (0, 1):
        r = fs.stack_redis(db)
        try:
            total += int(r.zcard(LEASE_INDEX))
        finally:
            r.close()
    return total


def test_the_key_and_the_password_are_nowhere(fs: FaultStack, soak: dict[str, Any]) -> None:
    secrets = (KEY, PASSWORD)
    texts = [json.dumps(r) for r in soak["reports"]]
    texts.append(fs.stack.worker_logs())
    for db in (0, 1):  # broker messages and bookkeeping; job store, results, chord state
        r = fs.stack_redis(db)
        try:
            texts.append(redis_dump(r))
        finally:
            r.close()
    leaks = [t[:200] for t in texts if any(s in t for s in secrets)]
    assert not leaks
    # The worker logs its broker URL with the password masked.
    assert "redis://:**@127.0.0.1" in fs.stack.worker_logs()


class Boom:
    """Unpickling this creates a directory: proof that a pickled message ran."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (os.mkdir, (str(self.path),))


def test_a_pickled_message_is_refused_logged_and_never_run(fs: FaultStack, tmp_path: Path) -> None:
    marker = tmp_path / "pickle-ran"
    worker = fs.stack.workers[0]
    mark = worker.log_path.stat().st_size  # wait for lines written from now on
    with kombu.Connection(fs.stack.broker_url) as conn:
        conn.Producer().publish(
            [[Boom(marker)], {}, {}],
            serializer="pickle",
            exchange="",
            routing_key="llm.kimi-k2.5",
            headers={"task": "swarm.subagent", "id": "pickled-task", "lang": "py"},
        )
    worker.wait_for_log(
        r"(?i)refusing to deserialize untrusted content of type pickle", 30, after=mark
    )
    time.sleep(0.5)
    assert not marker.exists()
    assert worker.alive
    # The message is dropped, not left to come back; the worker serves the next job.
    assert fs.client().submit(inputs(2), "Summarise").wait(timeout=60).to_dict()["succeeded"] == 2
    r = fs.stack_redis(0)
    try:
        assert "pickled-task" not in redis_dump(r)
    finally:
        r.close()


def test_inputs_that_are_odd_but_valid_become_flagged_nodes(fs: FaultStack) -> None:
    client = fs.client()
    fs.stack.reset_stats()
    items = [
        InputItem(ref="same-1", text="the same text"),
        InputItem(ref="same-2", text="the same text"),
        InputItem(ref="empty-choices", text="x [[sim:empty_choices]]"),
        InputItem(ref="no-usage", text="y [[sim:no_usage]]"),
        InputItem(ref="plain", text="a plain input"),
    ]
    report = client.submit(items, "Summarise").wait(timeout=60).to_dict()
    nodes = {n["input_ref"]: n for n in report["nodes"]}
    # Duplicates are nodes of their own, each answered.
    assert nodes["same-1"]["node_id"] != nodes["same-2"]["node_id"]
    assert nodes["same-1"]["status"] == nodes["same-2"]["status"] == "ok"
    # 200 with no choices: retried, then an error envelope that says so; each answer billed.
    empty = nodes["empty-choices"]
    assert (empty["status"], empty["error_kind"], empty["attempts"]) == ("error", "bad_response", 3)
    assert "no choices" in empty["error"] and empty["usage"]["prompt_tokens"] > 0
    # No usage field: the answer is used; the node says its usage is unknown.
    assert nodes["no-usage"]["status"] == "ok" and nodes["no-usage"]["usage_missing"] is True
    assert report["status"] == "partial" and report["failures_by_kind"] == {"bad_response": 1}
    billed = sum(line["calls"] for line in report["models"].values())
    assert billed == fs.stack.stats()["completed"] + 1  # + the answer without usage
    # Cut at max_tokens: finish_reason "length" is in each envelope and counted.
    cut = client.submit(inputs(3), "Summarise", max_tokens=5).wait(timeout=60).to_dict()
    assert {n["finish_reason"] for n in cut["nodes"]} == {"length"}
    assert cut["truncated"] == 3


def test_a_50_mb_input_is_accepted_truncated_and_flagged(fs: FaultStack) -> None:
    huge = "lorem ipsum dolor sit amet " * (50 * 1024 * 1024 // 27)
    report = (
        fs.client()
        .submit([InputItem(ref="huge.txt", text=huge), InputItem(ref="small.txt", text="hi")], "S")
        .wait(timeout=180)
        .to_dict()
    )
    big, small = report["nodes"]
    assert small["status"] == "ok" and small.get("truncation") is None
    assert big["status"] == "ok", big
    assert big["truncation"]["original_chars"] == len(huge)
    assert big["truncation"]["kept_chars"] < len(huge) // 10
    assert report["inputs_truncated"] == 1


def test_ten_thousand_inputs_are_accepted_and_enqueued_in_bounded_memory(
    fs: FaultStack,
) -> None:
    client = fs.client()
    items = [InputItem(ref=f"in-{i}", text=f"input {i} " * 40) for i in range(10_000)]
    tracemalloc.start()
    started = time.perf_counter()
    handle = client.submit(items, "Summarise", model="gemini-2.5-flash")  # queue not served
    submit_s = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    r = fs.stack_redis(0)
    try:
        queued = [m for k in r.scan_iter("llm.gemini-2.5-flash*") for m in r.lrange(k, 0, -1)]
        for key in r.scan_iter("llm.gemini-2.5-flash*"):
            r.delete(key)  # drop them: no worker here serves Gemini
    finally:
        r.close()
    summaries = [json.loads(m)["headers"]["argsrepr"] for m in queued]
    carried = sum(int(m.group(1)) if (m := re.search(r"\((\d+)\)", a)) else 1 for a in summaries)
    assert carried == 10_000 and all(handle.id in a for a in summaries)  # each node once
    assert client.store.progress(handle.id).total == 10_000
    peak_mib = peak / 2**20
    assert peak_mib < 256, peak_mib  # ~8 KB per node at most, inputs included
    inputs_mib = sum(len(i.text) for i in items) / 2**20
    print(
        f"\nFIGURE ten-thousand: submit_s={submit_s:.1f} messages={len(queued)} "
        f"tracemalloc_peak_mib={peak_mib:.0f} inputs_mib={inputs_mib:.1f} carried={carried}"
    )
    handle.cancel()


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda c: c.submit([], "S"), InputError, "no inputs"),
        (lambda c: c.submit(["x"], "  "), InputError, "instruction is empty"),
        (lambda c: c.submit(["x"], "S", model="gpt-9"), UnknownModelError, "gpt-9"),
        (lambda c: c.submit(["x"], "S", kind="astrology"), UnknownModelError, "astrology"),
        (lambda c: c.submit(["x"], "S", budget_usd=0), InputError, "budget"),
        (lambda c: c.submit(["x"], "S", budget_usd=-1), InputError, "budget"),
        (lambda c: c.attach("0" * 32), Exception, "no job"),
        (lambda c: c.resume("0" * 32), Exception, "no job"),
    ],
)
def test_producer_api_refusals_are_one_line(
    fs: FaultStack, call: Any, error: type[Exception], message: str
) -> None:
    with pytest.raises(error) as caught:
        call(fs.client())
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_cli_resume_of_an_unknown_job(fs: FaultStack) -> None:
    # (`swarm status` of an unknown job: test_swarm_e2e.py)
    out = run_cli(["resume", "f" * 32], fs.env)
    assert out.returncode == 2 and out.stderr.startswith("swarm: no job"), out.stderr
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr


def test_a_wrong_redis_password_is_one_clear_error(fs: FaultStack) -> None:
    wrong = fs.stack.broker_url.replace(PASSWORD, "not-the-password")
    with pytest.raises(BrokerUnavailableError, match="cannot reach Redis") as caught:
        SwarmClient.from_settings(Settings(broker_url=wrong, base_url="http://x/v1", api_key="k"))  # type: ignore[arg-type]
    assert PASSWORD not in str(caught.value) and "\n" not in str(caught.value)
