"""swarm.procs: a child in its own group logging to a file, readiness from its log, SIGTERM
then SIGKILL for the whole group, and leftovers killed by folder. Real processes, no services."""

from __future__ import annotations

import re
import signal
import socket
import sys
from pathlib import Path

import pytest

from swarm.errors import ProcessError
from swarm.procs import Process, cleanup, free_port, ports, stop_groups, unique_log
from swarm.procs.groups import wait_until
from swarm.procs.ports import REDIS_DEFAULT_PORT

PY = sys.executable
WAIT_S = 60.0  # generous: readiness is a condition, never a timing


def _proc(folder: Path, name: str, code: str, **env: str) -> Process:
    return Process([PY, "-c", code], unique_log(folder, name), env=env, name=name)


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def test_free_port_is_bindable_and_never_the_machine_s_redis() -> None:
    for port in {free_port() for _ in range(5)}:
        assert port != REDIS_DEFAULT_PORT
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", port))


def test_free_port_never_hands_out_a_port_twice_even_when_the_kernel_offers_it_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    offered = iter([41001, 41001, 41002, 41001, 41003])

    class OneSocket:
        def __enter__(self) -> OneSocket:
            return self

        def __exit__(self, *_: object) -> None:
            return None

        def bind(self, _address: object) -> None:
            return None

        def getsockname(self) -> tuple[str, int]:
            return ("127.0.0.1", next(offered))

    monkeypatch.setattr(socket, "socket", lambda *_: OneSocket())
    monkeypatch.setattr(ports, "_HANDED_OUT", set())
    monkeypatch.setattr(ports, "listen_range", lambda: (1, 0))  # unknown: the kernel picks
    assert [free_port(), free_port(), free_port()] == [41001, 41002, 41003]


def test_free_port_picks_below_the_ephemeral_range_never_twice(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "range").write_text("32768\t60999\n")
    assert ports.listen_range(str(tmp_path / "range")) == (ports.LISTEN_LOW, 32767)
    assert ports.listen_range(str(tmp_path / "missing")) == (1, 0)
    offered = iter([21001, 21001, 6379, 21002, 21001, 21003, 21004])
    monkeypatch.setattr(ports.random, "randint", lambda low, high: next(offered))
    monkeypatch.setattr(ports, "listen_range", lambda: (21000, 21010))
    monkeypatch.setattr(ports, "_bindable", lambda port: port != 21003)  # 21003 is taken
    monkeypatch.setattr(ports, "_HANDED_OUT", set())
    assert [free_port(), free_port(), free_port()] == [21001, 21002, 21004]


def test_wait_for_log_then_terminate_with_sigterm(tmp_path: Path) -> None:
    p = _proc(tmp_path, "hello", "print('hello', flush=True); import time; time.sleep(60)")
    try:
        assert p.wait_for_log("hel+o", WAIT_S).group(0) == "hello"
        assert p.alive and p.log_path.parent == tmp_path
    finally:
        code = p.terminate(grace_s=WAIT_S)
    assert code == -signal.SIGTERM and not p.alive


def test_terminate_escalates_to_sigkill_after_the_grace_period(tmp_path: Path) -> None:
    code = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('armed', flush=True); time.sleep(60)"
    )
    p = _proc(tmp_path, "stubborn", code)
    p.wait_for_log("armed", WAIT_S)
    assert p.terminate(grace_s=0.2) == -signal.SIGKILL


def test_stopping_a_group_takes_its_children_too(tmp_path: Path) -> None:
    code = (
        "import subprocess, sys, time; "
        "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
        "print('child', c.pid, flush=True); time.sleep(60)"
    )
    parent = _proc(tmp_path, "parent", code)
    child = int(parent.wait_for_log(r"child (\d+)", WAIT_S).group(1))
    stopped = stop_groups([(parent, signal.SIGTERM)], grace_s=WAIT_S)
    assert stopped == [parent] and not parent.alive
    assert wait_until(lambda: not _running(child), WAIT_S)  # an orphan of init for a moment


def test_an_exit_before_ready_fails_the_wait_with_the_log_tail(tmp_path: Path) -> None:
    p = _proc(tmp_path, "crasher", "print('boom: bad config', flush=True); raise SystemExit(3)")
    with pytest.raises(ProcessError, match=r"crasher exited at start \(exit code 3\)(.|\n)*boom"):
        p.wait_for_log("never printed", WAIT_S)


def test_a_line_printed_just_before_exiting_still_counts(tmp_path: Path) -> None:
    p = _proc(tmp_path, "e", "import os; print(os.environ['SWARM_X'], flush=True)", SWARM_X="42")
    p.wait_for_log("42", WAIT_S)
    assert wait_until(lambda: not p.alive, WAIT_S)
    p.wait_for_log("42", WAIT_S)


def test_not_ready_in_time_names_the_process_and_after_skips_old_lines(tmp_path: Path) -> None:
    with _proc(tmp_path, "ticker", "print('tick', flush=True); import time; time.sleep(60)") as p:
        p.wait_for_log("tick", WAIT_S)
        with pytest.raises(ProcessError, match=re.escape("not logging 'tick' after 0.2 s: ticker")):
            p.wait_for_log("tick", 0.2, after=p.log_path.stat().st_size)
    assert not p.alive


def test_logs_are_unique_per_name(tmp_path: Path) -> None:
    assert unique_log(tmp_path, "w@x") != unique_log(tmp_path, "w@x")
    assert sorted(f.name for f in tmp_path.iterdir()) == ["w@x-2.log", "w@x.log"]


def test_cleanup_kills_only_the_leftovers_under_a_folder(tmp_path: Path) -> None:
    code = "print('up', flush=True); import time; time.sleep(60)"
    mine, other = _proc(tmp_path / "mine", "x", code), _proc(tmp_path / "other", "x", code)
    try:
        mine.wait_for_log("up", WAIT_S)
        assert cleanup(tmp_path / "mine") == [mine]
        assert not mine.alive and other.alive
    finally:
        other.terminate()
