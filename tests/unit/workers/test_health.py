"""The worker healthcheck (workers/health.py): which node it pings, and how it answers."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from workers import health

HOST = socket.gethostname()


@pytest.mark.parametrize(
    ("argv", "node"),
    [
        (["celery", "-A", "workers", "worker", "-n", "worker-fast@%h"], f"worker-fast@{HOST}"),
        (["celery", "-A", "workers", "worker", "--hostname=w1@box"], "w1@box"),
        (["celery", "-A", "workers", "worker", "-nw2@%h"], f"w2@{HOST}"),
        (["celery", "-A", "workers", "worker", "-E"], f"celery@{HOST}"),
    ],
)
def test_the_node_name_is_the_one_celery_gives_the_worker(argv: list[str], node: str) -> None:
    assert health.node_name(health.hostname_option(argv)) == node


@pytest.mark.parametrize(
    ("argv", "worker"),
    [
        (["/opt/swarm/bin/celery", "-A", "workers", "worker"], True),
        (["/usr/bin/python3", "-m", "celery", "-A", "workers", "worker", "-c", "4"], True),
        (["celery", "-A", "workers", "flower"], False),
        (["python", "-m", "workers.health"], False),
        (["/usr/bin/tini", "--", "celery", "-A", "workers", "worker"], True),
        ([], False),
    ],
)
def test_celery_workers_are_told_from_other_processes(argv: list[str], worker: bool) -> None:
    assert health.is_celery_worker(argv) is worker


def _proc(root: Path, pid: int, argv: list[str]) -> None:
    (root / str(pid)).mkdir()
    (root / str(pid) / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")


def test_the_local_node_comes_from_the_worker_process_here(tmp_path: Path) -> None:
    (tmp_path / "self").mkdir()  # not a pid
    _proc(tmp_path, 1, ["/usr/bin/tini", "--", "sleep", "1"])
    _proc(tmp_path, 12, ["celery", "-A", "workers", "worker", "-n", "worker-reason@%h"])
    _proc(tmp_path, 7, ["python", "-m", "workers.health"])
    assert health.local_node(tmp_path) == f"worker-reason@{HOST}"


def test_no_worker_process_means_no_node(tmp_path: Path) -> None:
    _proc(tmp_path, 1, ["celery", "-A", "workers", "flower"])
    assert health.local_node(tmp_path) is None


class FakeControl:
    def __init__(self, replies: list[dict[str, Any]]) -> None:
        self.replies = replies
        self.calls: list[dict[str, Any]] = []

    def ping(self, **kwargs: Any) -> list[dict[str, Any]]:
        self.calls.append(kwargs)
        return self.replies


class FakeApp:
    def __init__(self, control: FakeControl) -> None:
        self.control = control
        self.closed = False

    def close(self) -> None:
        self.closed = True


def _fake_app(monkeypatch: pytest.MonkeyPatch, replies: list[dict[str, Any]]) -> FakeApp:
    app = FakeApp(FakeControl(replies))
    monkeypatch.setattr(health, "Celery", lambda *a, **k: app)
    monkeypatch.setenv(health.BROKER_ENV, "redis://:pw@redis:6379/0")
    return app


def test_only_the_local_node_is_pinged(monkeypatch: pytest.MonkeyPatch) -> None:
    app = _fake_app(monkeypatch, [{"w1@box": {"ok": "pong"}}])
    assert health.main(["w1@box"]) == 0
    assert app.control.calls == [{"destination": ["w1@box"], "timeout": health.TIMEOUT_S}]
    assert app.closed


def test_no_reply_is_unhealthy(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _fake_app(monkeypatch, [])
    assert health.main(["w1@box"]) == 1
    assert "w1@box did not answer" in capsys.readouterr().err


def test_a_failure_is_one_line_without_the_broker_password(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def boom(*args: Any, **kwargs: Any) -> None:
        raise ConnectionError("cannot connect to redis://:s3cret@redis:6379/0")

    monkeypatch.setattr(health, "Celery", boom)
    monkeypatch.setenv(health.BROKER_ENV, "redis://:s3cret@redis:6379/0")
    assert health.main(["w1@box"]) == 1
    err = capsys.readouterr().err
    assert "s3cret" not in err and "redis://***@redis:6379/0" in err
    assert err.count("\n") == 1


def test_no_broker_url_is_unhealthy(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(health.BROKER_ENV, raising=False)
    assert health.main(["w1@box"]) == 1
    assert "SWARM_BROKER_URL is not set" in capsys.readouterr().err


def test_the_check_imports_celery_but_not_the_swarm_package() -> None:
    code = "import sys, workers.health; print('swarm' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_a_sentinel_broker_is_pinged_through_the_named_master(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = "sentinel://s1:26379/0;sentinel://s2:26379/0"
    env = {health.SENTINEL_MASTER_ENV: "mymaster", health.SENTINEL_PASSWORD_ENV: "spw"}
    options = health.sentinel_options(url, env)
    assert options == {"master_name": "mymaster", "sentinel_kwargs": {"password": "spw"}}
    assert health.sentinel_options("redis://r:6379/0", env) == {}
    made: list[dict[str, Any]] = []
    app = FakeApp(FakeControl([{"w1@box": {"ok": "pong"}}]))
    monkeypatch.setattr(health, "Celery", lambda *a, **k: made.append(k) or app)
    monkeypatch.setenv(health.SENTINEL_MASTER_ENV, "mymaster")
    assert health.node_alive(url, "w1@box")
    assert made[0]["changes"]["broker_transport_options"]["master_name"] == "mymaster"
