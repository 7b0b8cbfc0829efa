"""Unit tests of the process helpers in tests/integration/procs.py (no Redis, no Celery)."""

from __future__ import annotations

import socket
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))

import procs


def test_free_port_is_bindable_and_not_6379() -> None:
    ports = {procs.free_port() for _ in range(5)}
    assert procs.FORBIDDEN_PORT not in ports
    for port in ports:
        assert 1024 <= port <= 65535
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", port))


def test_with_db_replaces_only_the_db() -> None:
    assert procs.with_db("redis://127.0.0.1:7000/0", 3) == "redis://127.0.0.1:7000/3"
    assert procs.with_db("redis://:pw@h:1", 2) == "redis://:pw@h:1/2"
    assert procs.with_db("redis://h:1/0?protocol=3", 1) == "redis://h:1/1?protocol=3"


def test_proc_wait_for_log_and_terminate(tmp_path: Path) -> None:
    code = "print('hello', flush=True); import time; time.sleep(30)"
    p = procs.Proc([sys.executable, "-c", code], tmp_path, name="hello")
    try:
        m = p.wait_for_log("hello", timeout=20)
        assert m.group(0) == "hello"
        assert p.alive
        assert p.pid > 0
    finally:
        rc = p.terminate(timeout=5)
    assert not p.alive
    assert rc == -15  # SIGTERM
    assert "hello" in p.log_text()
    assert p.log_path.parent == tmp_path


def test_proc_terminate_escalates_to_sigkill(tmp_path: Path) -> None:
    code = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('armed', flush=True); time.sleep(30)"
    )
    p = procs.Proc([sys.executable, "-c", code], tmp_path, name="stubborn")
    p.wait_for_log("armed", timeout=20)
    assert p.terminate(timeout=0.5) == -9
    assert not p.alive


def test_proc_kill_takes_the_whole_group(tmp_path: Path) -> None:
    child = "import time; time.sleep(30)"
    code = (
        "import subprocess, sys, time; "
        f"c = subprocess.Popen([sys.executable, '-c', {child!r}]); "
        "print('child', c.pid, flush=True); time.sleep(30)"
    )
    p = procs.Proc([sys.executable, "-c", code], tmp_path, name="parent")
    child_pid = int(p.wait_for_log(r"child (\d+)", timeout=20).group(1))
    p.kill()
    assert not p.alive
    # the grandchild got SIGKILL too (it may linger as a zombie of init for a moment)
    deadline = time.monotonic() + 5
    while _running(child_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(child_pid)


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def test_wait_for_log_reports_early_exit_with_log_tail(tmp_path: Path) -> None:
    code = "print('boom: bad config', flush=True); raise SystemExit(3)"
    p = procs.Proc([sys.executable, "-c", code], tmp_path, name="crasher")
    with pytest.raises(procs.ProcError, match=r"exited with 3(.|\n)*boom: bad config"):
        p.wait_for_log("never printed", timeout=20)
    p.terminate()


def test_wait_for_log_times_out_and_after_offset(tmp_path: Path) -> None:
    code = "print('tick', flush=True); import time; time.sleep(30)"
    with procs.Proc([sys.executable, "-c", code], tmp_path, name="ticker") as p:
        p.wait_for_log("tick", timeout=20)
        mark = p.log_mark()
        with pytest.raises(procs.ProcError, match="did not log"):
            p.wait_for_log("tick", timeout=0.3, after=mark)
    assert not p.alive


def test_env_is_merged_and_logs_are_unique(tmp_path: Path) -> None:
    code = "import os; print(os.environ['SWARM_X'], 'PATH' in os.environ, flush=True)"
    a = procs.Proc([sys.executable, "-c", code], tmp_path, env={"SWARM_X": "42"}, name="e")
    b = procs.Proc([sys.executable, "-c", code], tmp_path, env={"SWARM_X": "43"}, name="e")
    a.wait_for_log("42 True", timeout=20)
    b.wait_for_log("43 True", timeout=20)
    a.terminate()
    b.terminate()
    assert a.log_path != b.log_path


def test_cleanup_procs_kills_leftovers_under_a_dir(tmp_path: Path) -> None:
    code = "print('up', flush=True); import time; time.sleep(30)"
    mine = procs.Proc([sys.executable, "-c", code], tmp_path / "mine", name="x")
    other = procs.Proc([sys.executable, "-c", code], tmp_path / "other", name="x")
    try:
        mine.wait_for_log("up", timeout=20)
        assert procs.cleanup_procs(tmp_path / "mine") == [mine]
        assert not mine.alive
        assert other.alive
    finally:
        other.terminate()
