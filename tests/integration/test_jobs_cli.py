"""The operator's commands as a user runs them, against real redis-server, a `celery -A
workers worker` and a slow `swarm sim`: Ctrl-C on a waiting `swarm run`, `swarm status
--watch` piped, `swarm jobs`, `swarm cancel`, `swarm cost` of a running job, a job whose
queue no worker consumes, the pre-flight estimate line (of a run and of a resume), and a
worker started without a key."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import procs
import pytest
from stack import Stack, Worker, stack_fixture

pytestmark = pytest.mark.integration

stack = stack_fixture(
    ["--latency-ms", "1000", "--seed", "5"],
    # 4 calls at once (not llm.gemini-2.5-flash: that queue has no consumer)
    Worker("w1", "llm.kimi-k2.5", c=4, env={"SWARM_NODE_THREADS": "4"}),
)

CLI = [sys.executable, "-m", "swarm.cli.main"]


def piped_env(env: dict[str, str]) -> dict[str, str]:
    """The environment of a command whose output is piped, as a user's script runs it: no
    COLUMNS or LINES (a test runner may have set them)."""
    return {k: v for k, v in {**os.environ, **env}.items() if k not in ("COLUMNS", "LINES")}


def swarm(
    args: list[str], env: dict[str, str], timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], env=piped_env(env), capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def start(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    """`swarm ARGS` in the background, stderr piped (so not a terminal), Ctrl-C acted on as
    in a terminal (procs.interruptible_popen)."""
    return procs.interruptible_popen(
        [*CLI, *args], env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )


def test_a_cli_started_where_sigint_is_ignored_still_takes_ctrl_c() -> None:
    """What procs.interruptible_popen is for: this process ignoring SIGINT (a suite started in
    the background of a script) does not make the CLI's Ctrl-C ignored."""
    probe = "import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        proc = procs.interruptible_popen(
            [sys.executable, "-c", probe], env=dict(os.environ), stdout=subprocess.PIPE
        )
    finally:
        signal.signal(signal.SIGINT, before)
    out, err = proc.communicate(timeout=60)
    assert out.strip() == "True", err


def read_until(proc: subprocess.Popen[str], pattern: str, timeout_s: float = 90) -> tuple[str, str]:
    """Stderr lines of ``proc`` up to the first matching ``pattern``; (text, match group 1)."""
    assert proc.stderr is not None
    seen = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        seen.append(line)
        found = re.search(pattern, line)
        if found:
            return "".join(seen), found.group(1) if found.groups() else ""
    proc.kill()
    raise AssertionError(f"no {pattern!r} on stderr:\n{''.join(seen)}")


def interrupt(proc: subprocess.Popen[str], timeout_s: float = 60) -> tuple[str, str]:
    """Ctrl-C (one SIGINT) to ``proc``; its (stdout, stderr) once it has exited, stderr
    followed by each thread's signal state (/proc) when it was still running 5 s after the
    signal (whether it was pending, blocked or ignored). A process still running after
    ``timeout_s`` is sent a second SIGINT, and the first failing is an AssertionError that
    says what the second did."""
    proc.send_signal(signal.SIGINT)
    try:
        return proc.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        state = "\nstill running 5 s after SIGINT:\n" + _signal_state(proc.pid)
    try:
        out, err = proc.communicate(timeout=timeout_s)
        return out, err + state
    except subprocess.TimeoutExpired:
        pass
    proc.send_signal(signal.SIGINT)
    try:
        err = proc.communicate(timeout=30)[1]
        second = f"a second SIGINT ended it (exit {proc.returncode})"
    except subprocess.TimeoutExpired:
        proc.kill()
        err = proc.communicate()[1]
        second = "a second SIGINT did not end it either"
    raise AssertionError(f"SIGINT not acted on in {timeout_s:.0f} s; {second}{state}\n{err}")


def _signal_state(pid: int) -> str:
    """Each thread's name, state and signal masks (pending, blocked, ignored, caught)."""
    keys = ("Name:", "State:", "SigPnd:", "ShdPnd:", "SigBlk:", "SigIgn:", "SigCgt:")
    lines = []
    for task in sorted(Path(f"/proc/{pid}/task").iterdir()):
        try:
            status = (task / "status").read_text().splitlines()
            wchan = (task / "wchan").read_text()
        except OSError:
            continue
        fields = " ".join(line.split(None, 1)[1] if line.startswith("Name:") else line
                          for line in status if line.startswith(keys))  # fmt: skip
        lines.append(f"  thread {task.name}: {fields} wchan={wchan}")
    return "\n".join(lines)


def inputs(tmp_path: Path, n: int, marker: str = "") -> list[str]:
    files = []
    for i in range(n):
        path = tmp_path / f"doc{i}.txt"
        path.write_text(f"document {i}\n{marker}")
        files.append(str(path))
    return files


def test_ctrl_c_leaves_the_job_running_and_status_watch_follows_it(
    stack: Stack, tmp_path: Path
) -> None:
    files = inputs(tmp_path, 6, "[[sim:latency_ms=5000]]")  # two waves: 10 s
    slow_merge = "Merge the results. [[sim:latency_ms=8000]]"
    run = start(["run", *files, "--instruction", "Summarise", "--aggregate", slow_merge], stack.env)
    before, job_id = read_until(run, r"^swarm: waiting for job (\w+) ")
    watch = start(["status", job_id, "--watch"], stack.env)
    watching, _ = read_until(watch, r"^swarm: waiting for job (\w+) ")
    out, err = interrupt(run)
    err = before + err
    assert run.returncode == 130, err
    assert f"job {job_id} keeps running (Ctrl-C does not cancel it)" in err
    assert f"follow it: swarm status {job_id} --watch" in err
    assert f"cancel it: swarm cancel {job_id}" in err
    assert "Aborted!" not in err and "Traceback" not in err and out == ""
    watched_out, watched_err = watch.communicate(timeout=120)
    watched_err = watching + watched_err
    assert watch.returncode == 0, watched_err
    assert f"job {job_id}  succeeded  6/6 sub-agents succeeded" in watched_out
    assert all(line.startswith("swarm: ") for line in watched_err.splitlines())
    assert "\x1b[" not in watched_err
    assert "aggregating (final merge of 6 results on kimi-k2.5): done 6 failed 0" in watched_err
    listed = json.loads(swarm(["jobs", "--json", "-n", "1"], stack.env).stdout)
    assert [(j["job_id"], j["status"], j["done"], j["total"]) for j in listed] == [
        (job_id, "succeeded", 6, 6)
    ]
    assert listed[0]["cost_usd"] > 0


def test_jobs_cancel_and_the_cost_of_a_running_job(stack: Stack, tmp_path: Path) -> None:
    files = inputs(tmp_path, 200, "[[sim:latency_ms=3000]]")  # 150 s: it runs while we look
    first = swarm(["run", *files, "--no-wait"], stack.env).stdout.strip()
    deadline = time.monotonic() + 120
    while True:
        cost = swarm(["cost", first, "--json"], stack.env)
        assert cost.returncode == 0, cost.stderr
        data = json.loads(cost.stdout)
        if data["status"] != "running" or data["running"]["ended"] > 0:
            break
        assert time.monotonic() < deadline, cost.stdout
        time.sleep(0.5)
    assert data["status"] == "running" and data["running"]["total"] == 200
    assert data["job"]["per_swarm_usd"] > 0 and data["running"]["subagents_projected_usd"] > 0
    text = swarm(["cost", first], stack.env)
    assert text.returncode == 0 and f"job {first} is running (" in text.stdout
    assert (
        "billed so far $" in text.stdout and "at this pace the sub-agents end near $" in text.stdout
    )
    second = swarm(["run", *files, "--no-wait"], stack.env).stdout.strip()
    listed = json.loads(swarm(["jobs", "--json"], stack.env).stdout)
    assert [j["job_id"] for j in listed[:2]] == [second, first]
    assert [j["status"] for j in listed[:2]] == ["running", "running"], listed[:2]
    table = swarm(["jobs"], stack.env)
    assert table.returncode == 0 and first in table.stdout and "cost so far" in table.stdout
    waited = swarm(["cancel", first, "--wait", "--json"], stack.env)
    assert waited.returncode == 0, waited.stderr
    assert json.loads(waited.stdout)["status"] == "cancelled"
    assert f"job {first} cancelled: " in waited.stderr
    cancelled = swarm(["cancel", second], stack.env)
    assert cancelled.returncode == 0, cancelled.stderr
    assert (
        f"job {second} cancelled: sub-agents that have not called the gateway" in cancelled.stdout
    )
    assert "calls already in flight finish and are billed" in cancelled.stdout
    ended = swarm(["status", second, "--watch", "--json"], stack.env)
    report = json.loads(ended.stdout)
    assert ended.returncode == 1 and report["status"] == "cancelled"
    assert report["failures_by_kind"].get("cancelled", 0) > 0
    again = swarm(["cancel", second], stack.env)
    assert again.returncode == 1 and "already ended (cancelled)" in again.stderr
    unknown = swarm(["cancel", "no-such-job"], stack.env)
    assert unknown.returncode == 2 and "no job 'no-such-job'" in unknown.stderr


def test_a_queue_no_worker_consumes_is_named(stack: Stack, tmp_path: Path) -> None:
    run = start(["run", *inputs(tmp_path, 1), "--model", "gemini-2.5-flash"], stack.env)
    text, _ = read_until(run, r"^swarm: (no worker of the 1 running consumes .*)$")
    assert "consumes llm.gemini-2.5-flash; start one: celery -A workers worker -Q " in text
    assert "(still waiting)" in text and run.poll() is None  # it waits on
    job_id = re.search(r"waiting for job (\w+)", text)
    assert job_id is not None
    _, err = interrupt(run)
    assert run.returncode == 130, err
    assert swarm(["cancel", job_id.group(1)], stack.env).returncode == 0


def test_the_estimate_line_goes_to_stderr(stack: Stack, tmp_path: Path) -> None:
    files = inputs(tmp_path, 2)
    done = swarm(["run", *files, "--json"], stack.env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "succeeded"
    line = r"^swarm: estimate: expected ~\$\d+\.\d{4} \(answers of typical length\), at most \$"
    assert re.search(line + r"\d+\.\d{4} for 2 sub-agents", done.stderr, re.M), done.stderr
    quiet = swarm(["run", *files, "--no-wait"], stack.env)
    assert quiet.returncode == 0 and "estimate:" not in quiet.stderr  # far below $1
    always = swarm(["run", *files, "--no-wait"], {**stack.env, "SWARM_ESTIMATE_NOTICE_USD": "0"})
    assert "swarm: estimate: expected ~$" in always.stderr
    for job_id in (quiet.stdout.strip(), always.stdout.strip()):
        swarm(["cancel", job_id], stack.env)


def test_resume_announces_the_nodes_it_runs_again(stack: Stack, tmp_path: Path) -> None:
    (tmp_path / "bad").mkdir()
    files = [*inputs(tmp_path, 1), *inputs(tmp_path / "bad", 1, "[[sim:status=400]]")]
    first = swarm(["run", *files, "--json"], stack.env)
    job_id = json.loads(first.stdout)["job_id"]
    assert json.loads(first.stdout)["failed"] == 1, first.stderr
    quiet = swarm(["resume", job_id], stack.env)
    assert "estimate:" not in quiet.stderr, quiet.stderr  # far below $1
    resumed = swarm(["resume", job_id, "--json", "--timeout", "100"], stack.env)
    assert json.loads(resumed.stdout)["job_id"] == job_id, resumed.stderr
    assert re.search(
        r"^swarm: estimate: up to \$\d+\.\d{4} for 1 sub-agent run again \(\$\d+\.\d{4}\) and "
        r"the aggregation",
        resumed.stderr,
        re.M,
    ), resumed.stderr


def test_a_worker_without_the_key_its_gateway_needs_warns_at_start(
    stack: Stack, tmp_logs: Path
) -> None:
    env = {
        **stack.env,
        "SWARM_API_KEY": "",
        "SWARM_BASE_URL": "https://gateway.example.invalid/v1",
    }
    worker = procs.start_celery_worker(env, "llm.deepseek-v3.2", 1, "nokey@%h", tmp_logs)
    try:
        deadline = time.monotonic() + 60
        while "no API key for" not in worker.log_text() and time.monotonic() < deadline:
            time.sleep(0.2)
        log = worker.log_text()
        assert re.search(
            r"WARNING/MainProcess\] no API key for https://gateway\.example\.invalid/v1 "
            r"\(models .*kimi-k2\.5.*\): set SWARM_API_KEY \(or OPENAI_API_KEY\)",
            log,
        ), log
    finally:
        worker.terminate(10)


def test_status_watch_on_a_terminal_draws_the_live_view(stack: Stack) -> None:
    """The view is drawn before any answer can come: the stack's worker is frozen from the
    submit until the CLI has drawn its first frame (a loaded machine can take longer to start
    the CLI than the job takes to run, and then only the final table is printed)."""
    import pty

    # 8 s answers: the live view is redrawn while they run, within the stack's 10 s node timeout
    items = [f"document {i} [[sim:latency_ms=8000]]" for i in range(4)]
    frozen = [worker.pid for worker in stack.workers]
    for pid in frozen:
        os.killpg(pid, signal.SIGSTOP)
    try:
        job_id = stack.client().submit(items, "Summarise").id
        leader, follower = pty.openpty()
        watch = subprocess.Popen(
            [*CLI, "status", job_id, "--watch"], env={**os.environ, **stack.env, "COLUMNS": "120"},
            stdout=subprocess.PIPE, stderr=follower, text=True,
        )  # fmt: skip
        os.close(follower)
        drawn = read_terminal(leader, b"\x1b[", deadline=time.monotonic() + 120)
    finally:
        for pid in frozen:
            os.killpg(pid, signal.SIGCONT)
    drawn += read_terminal(leader, None, deadline=time.monotonic() + 120)
    out, _ = watch.communicate(timeout=120)
    os.close(leader)
    screen = drawn.decode("utf-8", "replace")
    assert watch.returncode == 0 and f"job {job_id}  succeeded" in out
    assert "\x1b[" in screen  # drawn and redrawn in place
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen)
    assert re.search(rf"swarm job {job_id}  (sub-agents running|aggregating)", text)
    assert "sub-agents ended: done " in text and "cost so far $" in text
    for head in ("model", "done", "failed", "in flight", "429s", "cost so far"):
        assert head in text


def read_terminal(fd: int, wanted: bytes | None, deadline: float) -> bytes:
    """What the terminal ``fd`` shows until ``wanted`` is in it, or (None) until it closes."""
    import select

    got = b""
    while time.monotonic() < deadline and (wanted is None or wanted not in got):
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        try:
            chunk = os.read(fd, 65536) if ready else b""
        except OSError:  # the terminal closed with the process
            break
        if ready and not chunk:
            break
        got += chunk
    return got


def test_the_gateway_warning_is_said_once_and_strict_refuses(stack: Stack, tmp_path: Path) -> None:
    """The same simulator under another name: the live worker calls another URL than this
    shell's. One line, worded as a warning; --strict refuses in words of its own."""
    env = {**stack.env, "SWARM_BASE_URL": stack.base_url.replace("127.0.0.1", "localhost")}
    files = inputs(tmp_path, 1)
    sent = swarm(["run", *files, "--no-wait"], env)
    assert sent.returncode == 0, sent.stderr
    said = [line for line in sent.stderr.splitlines() if "workers call" in line]
    assert len(said) == 1 and said[0].startswith("swarm: warning: the running workers call ")
    assert stack.base_url in said[0]
    swarm(["cancel", sent.stdout.strip()], stack.env)
    refused = swarm(["run", *files, "--no-wait", "--strict"], env)
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.startswith("swarm: refused (--strict): the running workers call ")
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr


def test_a_stopped_workers_gateway_no_longer_counts(stack: Stack, tmp_logs: Path) -> None:
    """A worker calling a dead URL: its nodes' errors name the URL (status --node), a
    killed worker drops out of the registry within its lease, and one that shuts down
    withdraws at once; the live stack worker stays."""
    import redis

    from swarm.store import gateways

    dead = "http://127.0.0.1:9/v1"
    env = {**stack.env, "SWARM_BASE_URL": dead, "SWARM_LEASE_S": "2", "SWARM_MAX_ATTEMPTS": "1"}
    client = redis.Redis.from_url(stack.settings().backend_url() or "")
    worker = procs.start_celery_worker(env, "llm.deepseek-v3.2", 2, "dead@%h", tmp_logs)
    try:
        assert {stack.base_url, dead} <= gateways.worker_gateways(client)
        done = swarm(["run", *inputs(tmp_logs, 1), "--model", "deepseek-v3.2", "--json"],
                     stack.env)  # fmt: skip
        report = json.loads(done.stdout)
        assert report["nodes"][0]["error_kind"] == "connection", done.stderr
        called = f"(calling {dead}/chat/completions)"
        assert report["nodes"][0]["error"].endswith(called)
        node = swarm(["status", report["job_id"], "--node", report["nodes"][0]["node_id"]],
                     stack.env)  # fmt: skip
        assert node.returncode == 0 and called in node.stdout, node.stderr
        worker.kill()
        deadline = time.monotonic() + 30
        while dead in gateways.worker_gateways(client) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert stack.base_url in gateways.worker_gateways(client)
        assert dead not in gateways.worker_gateways(client)
        worker = procs.start_celery_worker(env, "llm.deepseek-v3.2", 2, "dead@%h", tmp_logs)
        assert dead in gateways.worker_gateways(client)
        worker.terminate(10)
        assert dead not in gateways.worker_gateways(client)
    finally:
        worker.terminate(10)
        client.close()


def test_a_worker_whose_key_its_gateway_refuses_warns_at_start(
    stack: Stack, tmp_logs: Path
) -> None:
    sim, base_url = procs.start_sim(["--api-key", "sk-right"], tmp_logs)
    env = {**stack.env, "SWARM_BASE_URL": base_url, "SWARM_API_KEY": "sk-wrong"}
    with sim:
        worker = procs.start_celery_worker(env, "llm.deepseek-v3.2", 1, "badkey@%h", tmp_logs)
        try:
            found = worker.wait_for_log(r"WARNING/\w+\] start-up check: .*", 30)
            assert f"the gateway {base_url} rejected the API key" in found.group(0)
            assert "SWARM_API_KEY" in found.group(0)
        finally:
            worker.terminate(10)


def test_the_python_api_names_the_queues_no_worker_consumes(stack: Stack) -> None:
    from swarm.errors import JobTimeoutError

    with stack.client() as client:
        handle = client.submit(["a"], "Summarise", model="gemini-2.5-flash")
        try:
            with pytest.raises(JobTimeoutError) as raised:
                handle.wait(timeout=6)
        finally:
            handle.cancel()
    said = str(raised.value)
    assert "no worker of the 1 running consumes llm.gemini-2.5-flash;" in said, said


def test_resume_of_a_succeeded_job_says_there_is_nothing_to_resume(
    stack: Stack, tmp_path: Path
) -> None:
    done = swarm(["run", *inputs(tmp_path, 1), "--json"], stack.env)
    report = json.loads(done.stdout)
    assert report["status"] == "succeeded", done.stderr
    job_id = report["job_id"]
    with stack.client() as client:
        stored = client.store.report_summary(job_id)
        again = swarm(["resume", job_id], stack.env)
        assert again.returncode == 0 and again.stdout == "", again.stderr
        assert again.stderr.strip() == f"swarm: job {job_id} succeeded: nothing to resume"
        assert client.resume(job_id).report() is not None  # the API: a no-op too
        assert client.store.report_summary(job_id) == stored  # not rewritten
