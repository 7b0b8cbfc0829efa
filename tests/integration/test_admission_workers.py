"""End to end: worker processes on one Redis hold the catalog's limits together,
and a SIGKILLed worker's in-flight permit comes back when its lease expires."""

from __future__ import annotations

import time
from pathlib import Path

import procs
import pytest
from stack import Stack, stack_fixture

from swarm.calls.admission import AdmissionPolicy
from swarm.calls.admission.base import Ask
from swarm.calls.admission.redis import RedisAdmission
from swarm.catalog import load_catalog
from swarm.client import SwarmClient
from swarm.records import InputItem

pytestmark = pytest.mark.integration

MODEL = "kimi-k2.5"
QUEUE = f"llm.{MODEL}"


def catalog(folder: Path, rps: int, max_inflight: int) -> Path:
    path = folder / "catalog.toml"
    path.write_text(
        f'[models."{MODEL}"]\ngateway_name = "{MODEL}"\nqueue = "{QUEUE}"\n'
        "input_per_mtok_usd = 1.5\noutput_per_mtok_usd = 0.6\ncached_input_per_mtok_usd = 0.15\n"
        f"rpm = 6000\nrps = {rps}\ntpm = 100000000\nmax_inflight = {max_inflight}\n"
        "context_window = 262144\nmax_tokens = 256\n\n"
        f'[routing]\ndefault = ["{MODEL}"]\naggregate = ["{MODEL}"]\n',
        "utf-8",
    )
    return path


# No limits in the simulator: its /stats windows show everything the workers sent.
stack = stack_fixture(["--latency-ms", "50"], scope="function")


def start_workers(stack: Stack, logs: Path, n: int, env: dict[str, str]) -> list[procs.Proc]:
    for i in range(n):
        worker = procs.start_celery_worker(
            {**stack.env, **env}, QUEUE, 8, f"adm{i}@%h", logs, timeout=90
        )
        stack.workers.append(worker)
    return stack.workers


def items(n: int, marker: str = "") -> list[InputItem]:
    return [InputItem(ref=f"in-{i}", text=f"input {i} {marker}") for i in range(n)]


def test_three_workers_never_exceed_the_catalog_rps(stack: Stack, tmp_logs: Path) -> None:
    path = catalog(tmp_logs, rps=5, max_inflight=50)
    # The slack is the shift of arrivals at the gateway against admission times that the
    # spacing absorbs (T = (1 s + 2 x slack) / 4): on a loaded CI machine a worker thread or
    # the simulator's event loop can be held up for hundreds of milliseconds, and at the
    # default 0.1 s one such stall put 6 arrivals in one second. 0.4 s takes a 1.25 s stall.
    env = {"SWARM_CONFIG": str(path), "SWARM_ADMISSION_WINDOW_SLACK_S": "0.4"}
    start_workers(stack, tmp_logs, 3, env)
    stack.reset_stats()
    report = client(stack, path).submit(items(36), "Summarise").wait(timeout=120).to_dict()
    assert report["status"] == "succeeded", report.get("error")
    stats = stack.stats()
    assert stats["models"][MODEL]["completed"] == 37  # 36 sub-agents + the aggregation
    # 24 worker threads could send 24 requests at once; admission kept it to 5 per second.
    assert stats["windows"][MODEL]["max_requests_1s"] <= 5
    assert stats["rate_limited"] == 0
    counters = admission(stack).counters(load_catalog(path).model(MODEL))
    assert counters.admitted == 37 and counters.inflight == 0 and counters.refused > 0


def client(stack: Stack, catalog_path: Path) -> SwarmClient:
    return SwarmClient.from_settings(stack.settings(config=catalog_path))


def admission(stack: Stack) -> RedisAdmission:
    store_url = procs.with_db(stack.broker_url, 1)  # the job store's Redis: broker db + 1
    return RedisAdmission.from_url(store_url, stack.base_url, AdmissionPolicy())


def wait_until(predicate, timeout_s: float) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_a_killed_workers_permit_returns_after_its_lease(stack: Stack, tmp_logs: Path) -> None:
    path = catalog(tmp_logs, rps=50, max_inflight=1)
    env = {"SWARM_CONFIG": str(path), "SWARM_ADMISSION_LEASE_S": "3", "SWARM_NODE_TIMEOUT_S": "2.5"}
    (worker,) = start_workers(stack, tmp_logs, 1, env)
    model = load_catalog(path).model(MODEL)
    ctl = admission(stack)
    client(stack, path).submit(items(2, "[[sim:latency_ms=2000]]"), "Summarise")
    assert wait_until(lambda: ctl.counters(model).inflight == 1, 30)
    worker.kill()  # SIGKILL mid-call: nothing releases the lease
    assert ctl.acquire(model, Ask("other-job", 10)).permit is None  # the permit is still out
    assert wait_until(lambda: ctl.acquire(model, Ask("other-job", 10)).permit is not None, 10)
    assert ctl.counters(model).expired == 1
