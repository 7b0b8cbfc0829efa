"""What the CLI shows of a running job: its phase, labelled counts, cost so far and ETA;
the check for queues without a consumer; the pre-flight line; and waiting on a job in an
in-memory store (plain lines when piped, Ctrl-C leaving the job running)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from doubles import job_spec

from swarm.catalog import load_catalog
from swarm.cli import follow as follow_module
from swarm.cli.estimate_line import estimate_text
from swarm.cli.follow import Watch, follow
from swarm.cli.idle import idle_line, job_queues
from swarm.cli.jobs_view import age, jobs_table
from swarm.cli.snapshot import JobSnapshot, clock, plain_line, take_snapshot
from swarm.cost.budget import JobEstimate
from swarm.records import NodeEnvelope, NodeTask, Usage
from swarm.store import MemoryJobStore, ModelProgress, Progress
from swarm.store.base import JobSummary
from swarm.store.billing import BilledCall


def snapshot(
    done: int = 0, failed: int = 0, in_flight: int = 0, total: int = 10, **fields: Any
) -> JobSnapshot:
    phase = fields.pop("phase", None)
    finished = fields.pop("finished", False)
    models = {"kimi-k2.5": ModelProgress(done=done, failed=failed, in_flight=in_flight)}
    progress = Progress(
        total=total, done=done, failed=failed, in_flight=in_flight, models=models,
        finished=finished, phase=phase,
    )  # fmt: skip
    base: dict[str, Any] = {
        "job_id": "j1",
        "elapsed_s": 20.0,
        "cost_usd": 0.0123,
        "budget_usd": None,
        "cancelled": False,
    }
    return JobSnapshot(progress=progress, **{**base, **fields})


@pytest.mark.parametrize(
    ("snap", "phase"),
    [
        (snapshot(), "queued (no sub-agent started yet)"),
        (snapshot(done=2, in_flight=3), "sub-agents running"),
        (snapshot(done=9, failed=1), "aggregation queued"),
        (snapshot(done=10, phase="aggregating"), "aggregating"),
        (
            snapshot(done=10, phase="reduce level 2 of at most 3: 4 calls"),
            "aggregating (reduce level 2 of at most 3: 4 calls)",
        ),
        (snapshot(done=3, cancelled=True), "cancelling: sub-agents running"),
        (snapshot(done=10, finished=True), "finished"),
    ],
)
def test_the_phase_says_what_the_job_waits_for(snap: JobSnapshot, phase: str) -> None:
    assert snap.phase == phase


def test_eta_from_the_pace_so_far_and_none_once_aggregating() -> None:
    assert snapshot(done=4, in_flight=2).eta_s == pytest.approx(30.0)  # 20 s for 4 of 10
    assert snapshot(in_flight=2).eta_s is None
    assert snapshot(done=10, phase="final merge").eta_s is None
    assert clock(75) == "1:15" and clock(3725) == "1:02:05" and clock(0.4) == "0:01"


def test_the_live_view_shows_phase_models_cost_and_eta() -> None:
    from rich.console import Console

    from swarm.cli.live_view import live_view

    console = Console(record=True, width=100)
    snap = snapshot(done=4, in_flight=2, rate_limited={"kimi-k2.5": 3}, budget_usd=1.0,
                    model_cost_usd={"kimi-k2.5": 0.0123}, retries={"kimi-k2.5": 7})  # fmt: skip
    console.print(live_view(snap))
    text = console.export_text()
    assert "job j1  sub-agents running  0:20" in text
    assert "4/10 sub-agents ended: done 4 failed 0 in flight 2 pending 4" in text
    assert "429s" in text and "retries" in text and "cost so far" in text
    (row,) = [line for line in text.splitlines() if line.startswith("kimi-k2.5")]
    assert row.split()[1:6] == ["4", "0", "2", "3", "7"]  # done, failed, in flight, 429s, retries
    assert "cost so far $0.0123 of budget $1.0000   ETA 0:30 (sub-agents)" in text


def test_the_plain_line_labels_every_count() -> None:
    line = plain_line(snapshot(done=37, in_flight=16, total=121, rate_limited={"kimi-k2.5": 3},
                               retries={"kimi-k2.5": 5}))  # fmt: skip
    assert line == (
        "job j1 [0:20] sub-agents running: done 37 failed 0 in flight 16 pending 68 of 121; "
        "429s 3 retries 5; cost so far $0.0123; ETA 0:46"
    )
    assert "\n" not in line and "/" not in line
    budgeted = plain_line(snapshot(done=1, budget_usd=0.5))
    assert "cost so far $0.0123 of budget $0.5000" in budgeted


def test_a_snapshot_reads_counts_cost_and_429s_from_the_store() -> None:
    store = MemoryJobStore()
    spec = job_spec(3, budget_usd=1.0)
    store.create_job(spec, ["a", "b", "c"])
    store.mark_running("j1", "n00", "kimi-k2.5")
    store.finish_node("j1", NodeEnvelope(node_id="n01", input_ref="f1", model="kimi-k2.5",
                                         status="ok", content="x"))  # fmt: skip
    usage = Usage(prompt_tokens=1_000_000)
    store.record_call(
        "j1", BilledCall(call_id="c1", model="kimi-k2.5", usage=usage, cost_nusd=1_500_000_000)
    )
    store.count_rate_limited("j1", "kimi-k2.5")
    store.count_retry("j1", "kimi-k2.5")
    store.count_retry("j1", "kimi-k2.5")
    snap = take_snapshot(store, load_catalog(), spec, now=spec.submitted_at + 4)
    assert (snap.progress.done, snap.progress.in_flight, snap.progress.pending) == (1, 1, 1)
    assert snap.cost_usd == pytest.approx(1.5) and snap.budget_usd == 1.0
    assert snap.model_cost_usd["kimi-k2.5"] == pytest.approx(1.5)  # $1.50 per M input
    assert snap.rate_limited == {"kimi-k2.5": 1} and snap.elapsed_s == pytest.approx(4)
    assert snap.retries == {"kimi-k2.5": 2}


def test_the_idle_line_names_the_queues_without_a_consumer() -> None:
    catalog = load_catalog()
    tasks = {"n01": NodeTask(model="gemini-2.5-flash", instruction="extract")}
    spec = job_spec(2, tasks=tasks)
    queues = job_queues(spec, catalog, "nodes")
    assert queues == ["llm.gemini-2.5-flash", "llm.kimi-k2.5"]
    assert job_queues(spec, catalog, "aggregate") == ["llm.kimi-k2.5"]
    line = idle_line(queues, {"llm.kimi-k2.5"}, 2)
    assert line == (
        "no worker of the 2 running consumes llm.gemini-2.5-flash; start one: celery -A "
        "workers worker -Q llm.gemini-2.5-flash (still waiting)"
    )
    nobody = idle_line(queues, set(), 0)
    assert nobody is not None and nobody.startswith("no worker answered on the broker")
    assert idle_line(queues, set(queues), 1) is None
    assert idle_line(queues, None, 0) is None  # the broker could not be asked


def test_the_estimate_line_gives_the_bound_and_its_parts() -> None:
    bound = JobEstimate(
        nodes=150, prompt_tokens=2_000_000, completion_tokens=300_000,
        subagents_nusd=1_000_000_000, aggregation_nusd=230_000_000,
    )  # fmt: skip
    assert estimate_text(bound) == (
        "estimate: up to $1.2300 for 150 sub-agents ($1.0000) and the aggregation ($0.2300); "
        "an upper bound (every prompt uncached, every answer at max_tokens: 2,000,000 prompt "
        "+ 300,000 completion tokens at most)"
    )


def test_the_estimate_line_of_a_plan_and_of_a_resume() -> None:
    plan = JobEstimate(
        nodes=3, prompt_tokens=9_000, completion_tokens=8_000, subagents_nusd=30_000_000,
        aggregation_nusd=10_000_000, planner_nusd=5_000_000,
    )  # fmt: skip
    text = estimate_text(plan, assumes="if the plan gives each document one sub-task")
    assert text.startswith(
        "estimate: up to $0.0450 for the planner ($0.0050), 3 sub-agents ($0.0300) and the "
        "aggregation ($0.0100), if the plan gives each document one sub-task; an upper bound"
    )
    rerun = plan.model_copy(update={"nodes": 1, "planner_nusd": 0})
    assert estimate_text(rerun, again=True).startswith(
        "estimate: up to $0.0400 for 1 sub-agent run again ($0.0300) and the aggregation"
    )


def test_ages() -> None:
    assert [age(s) for s in (5, 75, 7200, 200000)] == ["5s", "1m", "2h", "2d"]


def _finish_later(store: MemoryJobStore, delay_s: float) -> threading.Thread:
    def run() -> None:
        store.mark_running("j1", "n00", "kimi-k2.5")
        time.sleep(delay_s)
        store.finish_node("j1", NodeEnvelope(node_id="n00", input_ref="f0", model="kimi-k2.5",
                                             status="ok", content="x"))  # fmt: skip
        store.set_phase("j1", "final merge of 1 results on kimi-k2.5")
        time.sleep(delay_s)
        store.save_report("j1", {"job_id": "j1", "status": "succeeded", "models": {}})

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_waiting_piped_prints_plain_lines_at_phase_changes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    store = MemoryJobStore()
    store.create_job(job_spec(1), ["a"])
    thread = _finish_later(store, 0.6)
    report = follow(Watch(store, load_catalog(), "j1"), timeout_s=60, live=False)
    thread.join()
    assert report["status"] == "succeeded"
    err = capsys.readouterr().err
    assert "\x1b[" not in err
    assert "swarm: waiting for job j1 (1 sub-agent; Ctrl-C stops waiting, not the job)" in err
    assert "sub-agents running: done 0 failed 0 in flight 1 pending 0 of 1" in err
    assert "aggregating (final merge of 1 results on kimi-k2.5): done 1 failed 0" in err


def test_a_job_waiting_for_a_worker_is_checked_once_per_stage(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(follow_module, "IDLE_CHECK_S", 0.2)
    store = MemoryJobStore()
    store.create_job(job_spec(1), ["a"])
    stages: list[str] = []

    def check(spec: Any, stage: str) -> str:
        stages.append(stage)
        if stage == "nodes":
            threading.Timer(0.5, _finish_later, (store, 0.0)).start()
        return f"nobody consumes the {stage} queue"

    watch = Watch(store, load_catalog(), "j1", idle_check=check)
    follow(watch, timeout_s=60, live=False)
    assert stages == ["nodes"]
    assert "swarm: nobody consumes the nodes queue" in capsys.readouterr().err


def test_ctrl_c_while_waiting_names_the_job_and_exits_130(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = MemoryJobStore()
    store.create_job(job_spec(1), ["a"])

    def interrupt(*_: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(follow_module.time, "sleep", interrupt)
    for live in (False, True):
        with pytest.raises(SystemExit) as exited:
            follow(Watch(store, load_catalog(), "j1"), timeout_s=None, live=live)
        assert exited.value.code == 130
        err = capsys.readouterr().err
        assert "job j1 keeps running (Ctrl-C does not cancel it)" in err
        assert "follow it: swarm status j1 --watch" in err and "cancel it: swarm cancel j1" in err
    ended: list[int] = []

    def end_now(status: int) -> None:  # the real one ends the process at once (os._exit)
        ended.append(status)
        raise SystemExit(status)

    monkeypatch.setattr(follow_module, "ignore_ctrl_c", lambda: None)
    monkeypatch.setattr(follow_module, "end_now", end_now)
    with pytest.raises(SystemExit):
        follow(Watch(store, load_catalog(), "j1", embedded=True), timeout_s=None, live=False)
    assert "ran inside this process (embedded mode) and stops with it" in capsys.readouterr().err
    assert ended == [130]


def test_waiting_past_the_timeout_says_the_job_keeps_running() -> None:
    from swarm.errors import JobTimeoutError

    store = MemoryJobStore()
    store.create_job(job_spec(1), ["a"])
    with pytest.raises(JobTimeoutError, match="keeps running: swarm status j1 --watch"):
        follow(Watch(store, load_catalog(), "j1"), timeout_s=0.3, live=False)


def test_the_jobs_table_title_counts_in_words() -> None:
    def job(n: int) -> JobSummary:
        return JobSummary(
            job_id=f"j{n}", submitted_at=0.0, status="running", total=2, done=1, failed=0,
            in_flight=1, cost_usd=0.0,
        )  # fmt: skip

    assert jobs_table([job(1)], 10.0).title == "the job submitted last"
    assert jobs_table([job(1), job(2)], 10.0).title == "the 2 jobs submitted last, newest first"
