"""A batch job survives the worker that polls its batch: SIGKILL mid-batch, real
redis-server, `celery -A workers worker` processes, the simulator over HTTP."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import procs
import pytest
from faults import FaultStack
from stack import Worker, running_stack, start_stack
from test_redis_faults import KOMBU_RECONNECT_RACE, RECOVERY

from swarm.records import InputItem
from swarm.store.batches import batch_store

pytestmark = pytest.mark.integration

MODEL = "kimi-k2.5"
WAIT_S = 120.0
"""Generous bounds for conditions the stack reaches (never timing assertions)."""


def wait_until(check: Callable[[], Any], what: str, timeout_s: float = WAIT_S) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if found := check():
            return found
        time.sleep(0.1)
    raise AssertionError(f"not within {timeout_s:.0f} s: {what}")


def test_sigkill_of_the_polling_worker_mid_batch(redis_server: Any, tmp_logs: Path) -> None:
    sim_args = ["--batch-processing-s", "8", "--seed", "9"]
    with running_stack(redis_server, tmp_logs, sim_args, [Worker("w1", c=4)]) as st:
        client = st.client()
        items = [InputItem(ref=f"d{i}", text=f"document {i}") for i in range(50)]
        handle = client.submit(items, "Extract x", deadline_s=600)
        batches = batch_store(client.store)
        state = wait_until(lambda: (s := batches.get(handle.id, 0)) and s.batch_id and s,
                           "the batch created and its id stored")  # fmt: skip
        assert st.stats()["batch"]["batches_created"] == 1
        victim = st.workers[0]
        victim.kill()  # SIGKILL while it holds the poll's countdown (or runs it)
        assert "swarm.batch.poll" in victim.log_text()
        st.add_worker("w2", tmp_logs, c=4)
        report = handle.wait(timeout=WAIT_S).to_dict()
        assert report["status"] == "succeeded", report.get("error")
        stats = st.stats()
        assert stats["batch"]["batches_created"] == 1  # never created again
        line = report["models"][MODEL]
        assert line["batch_calls"] == stats["batch"]["lines_billed"] == 50
        assert line["calls"] == 50 + stats["completed"]  # + the aggregation, live
        assert line["prompt_tokens"] == stats["batch"]["prompt_tokens"] + stats["prompt_tokens"]
        assert {node["via"] for node in report["nodes"]} == {"batch"}
        assert batches.get(handle.id, 0).batch_id == state.batch_id  # type: ignore[union-attr]


def test_a_redis_restart_mid_batch_loses_nothing(
    redis_factory: Callable[..., procs.RedisServer], tmp_logs: Path
) -> None:
    srv = redis_factory(appendonly=True)
    st = start_stack(srv.url, tmp_logs, ["--batch-processing-s", "8", "--seed", "11"])
    fs = FaultStack(st, {**st.env, **RECOVERY}, tmp_logs)
    try:
        workers = fs.ensure_workers(["w1", "w2"], 4)
        client = fs.client()
        items = [InputItem(ref=f"d{i}", text=f"document {i}") for i in range(40)]
        handle = client.submit(items, "Extract x", deadline_s=600)
        batches = batch_store(client.store)
        wait_until(lambda: (s := batches.get(handle.id, 0)) and s.batch_id,
                   "the batch created and its id stored")  # fmt: skip
        srv.restart()
        # the producer's own connections reconnect; a worker dead of kombu's reconnect race
        # (test_redis_faults) is started again, as a restart policy would
        report = fs.wait_restarting(handle, ["w1", "w2"], 4, WAIT_S, KOMBU_RECONNECT_RACE).to_dict()
        assert report["status"] == "succeeded", report.get("error")
        stats = st.stats()
        assert stats["batch"]["batches_created"] == 1
        line = report["models"][MODEL]
        assert line["batch_calls"] == stats["batch"]["lines_billed"] == 40
        assert line["calls"] == 40 + stats["completed"]
        for worker in workers:
            assert worker.alive or KOMBU_RECONNECT_RACE in worker.log_text(), worker.log_tail()
    finally:
        gc.collect()
        st.stop()


def test_cancelling_the_job_cancels_its_batch(redis_server: Any, tmp_logs: Path) -> None:
    sim_args = ["--batch-processing-s", "10", "--seed", "13"]
    with running_stack(redis_server, tmp_logs, sim_args, [Worker("w1", c=4)]) as st:
        client = st.client()
        items = [InputItem(ref=f"d{i}", text=f"document {i}") for i in range(30)]
        handle = client.submit(items, "Extract x", deadline_s=3600)
        batches = batch_store(client.store)
        wait_until(lambda: (s := batches.get(handle.id, 0)) and s.batch_id,
                   "the batch created and its id stored")  # fmt: skip
        handle.cancel()
        report = handle.wait(timeout=WAIT_S).to_dict()
        assert report["status"] == "cancelled"
        assert {node["error_kind"] for node in report["nodes"]} == {"cancelled"}
        stats = st.stats()
        assert stats["batch"]["batches_cancelled"] == 1
        assert (
            report["models"].get(MODEL, {}).get("batch_calls", 0) == stats["batch"]["lines_billed"]
        )
