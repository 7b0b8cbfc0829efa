"""`swarm demo` on a machine with no Redis and no key, as a user runs it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import procs

CONTRACT = {
    "job_id",
    "status",
    "total",
    "succeeded",
    "failed",
    "final",
    "wall_s",
    "usage",
    "cost_usd",
    "models",
    "nodes",
}
NODE = {
    "node_id",
    "input_ref",
    "model",
    "status",
    "content",
    "usage",
    "latency_ms",
    "attempts",
    "error_kind",
    "error",
}


def run_demo(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`swarm demo` with no SWARM_* or OPENAI_* variable set, outside the repository."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SWARM_", "OPENAI_"))}
    return subprocess.run(
        [sys.executable, "-m", "swarm.cli.main", "demo", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_demo_json_runs_embedded_and_reports_every_field(tmp_path: Path) -> None:
    done = run_demo(tmp_path, "--inputs", "30", "--json")
    assert done.returncode == 0, done.stderr
    assert "SIMULATED" in done.stderr
    report = json.loads(done.stdout)
    assert report.keys() >= CONTRACT and report["nodes"][0].keys() >= NODE
    assert (report["status"], report["total"], report["succeeded"]) == ("succeeded", 30, 30)
    assert report["models"]["kimi-k2.5"]["calls"] == 31
    assert "results=30" in report["final"]
    nodes_prompt = sum(n["usage"]["prompt_tokens"] for n in report["nodes"])
    assert report["usage"]["prompt_tokens"] > nodes_prompt  # the aggregation is billed too
    usage = report["usage"]
    uncached = usage["prompt_tokens"] - usage["cached_tokens"]
    expected = (
        uncached * 1.50 + usage["cached_tokens"] * 0.15 + usage["completion_tokens"] * 0.60
    ) / 1e6
    assert abs(report["cost_usd"] - expected) < 1e-5


def test_demo_text_report(tmp_path: Path) -> None:
    done = run_demo(tmp_path, "--inputs", "5")
    assert done.returncode == 0, done.stderr
    assert "succeeded" in done.stdout and "5/5 sub-agents succeeded" in done.stdout
    assert "kimi-k2.5" in done.stdout and "cost USD" in done.stdout


def start_embedded(cwd: Path, args: list[str], stdin: str = "") -> subprocess.Popen[str]:
    """`swarm ARGS` in embedded mode (no SWARM_* set), stderr piped, ``stdin`` written,
    Ctrl-C acted on as in a terminal (procs.interruptible_popen)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SWARM_", "OPENAI_"))}
    proc = procs.interruptible_popen(
        [sys.executable, "-m", "swarm.cli.main", *args], cwd=cwd, env=env,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdin is not None
    proc.stdin.write(stdin)
    proc.stdin.close()
    proc.stdin = None
    return proc


def stderr_until(proc: subprocess.Popen[str], text: str) -> str:
    """Stderr of ``proc`` up to and including the first line containing ``text``."""
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if text in line:
            return "".join(seen)
    proc.kill()
    raise AssertionError(f"no {text!r} on stderr:\n{''.join(seen)}")


def after_interrupt(err: str) -> list[str]:
    """The non-blank stderr lines from the interrupted line on."""
    lines = [line for line in err.splitlines() if line.strip()]
    firsts = [i for i, line in enumerate(lines) if line.startswith("swarm: interrupted")]
    assert firsts, err
    return lines[firsts[0] :]


def test_ctrl_c_on_run_simulate_ends_with_one_line(tmp_path: Path) -> None:
    """Ctrl-C while sub-agents run: one line, exit 130, and none of the in-process worker's
    errors (tasks that found no runtime asked for SWARM_BASE_URL, a traceback each)."""
    inputs = "".join(f"input {i}\n" for i in range(200))
    proc = start_embedded(tmp_path, ["run", "-", "--simulate"], inputs)
    seen = stderr_until(proc, "sub-agents running")
    proc.send_signal(signal.SIGINT)
    rest = proc.communicate(timeout=60)[1]
    assert proc.returncode == 130, seen + rest
    assert after_interrupt(rest) == [
        next(line for line in rest.splitlines() if line.startswith("swarm: interrupted"))
    ], rest
    assert "Traceback" not in rest and "SWARM_BASE_URL" not in rest


def test_ctrl_c_twice_on_a_large_demo_ends_quietly(tmp_path: Path) -> None:
    """`swarm demo --inputs 300`: a first Ctrl-C ends the process with its one line; a
    second one right after it (a user who saw nothing happen) adds nothing: no
    ``Exception ignored in: <module 'threading'>``, no worker traceback."""
    proc = start_embedded(tmp_path, ["demo", "--inputs", "300"])
    seen = stderr_until(proc, "sub-agents running")
    proc.send_signal(signal.SIGINT)
    said = stderr_until(proc, "swarm: interrupted")
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    rest = proc.communicate(timeout=60)[1]
    assert proc.returncode == 130, seen + said + rest
    assert "job" in said and "stops with it" in said
    assert not rest.strip(), rest
