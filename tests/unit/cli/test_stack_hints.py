"""The lines `swarm stack up` prints for the user's shell: pasted as they are, they reach
the stack (REDIS_PASSWORD comes from the env file when the shell does not have it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from swarm.cli.stack_cmd import _hints
from swarm.stack.state import ProcessState


def process(service: str, port: int) -> ProcessState:
    return ProcessState(
        name=f"{service}-1", service=service, wave=0, pid=1, start_ticks=None, port=port,
        metrics_port=None, log="/tmp/x.log", stop_signal="SIGTERM", stop_grace_s=1.0,
    )  # fmt: skip


STACK = (process("redis", 24794), process("sim", 23740))


def test_the_hints_read_the_env_file_when_the_shell_has_no_password(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.delenv("REDIS_PASSWORD", raising=False)
    _hints(STACK, tmp_path / "my env")
    lines = capsys.readouterr().out.splitlines()
    assert lines[:3] == [
        f"set -a && . '{tmp_path}/my env' && set +a   # REDIS_PASSWORD",
        "export SWARM_BROKER_URL=redis://:$REDIS_PASSWORD@127.0.0.1:24794/0",
        "export SWARM_BASE_URL=http://127.0.0.1:23740/v1",
    ]


def test_the_hints_name_no_file_when_the_shell_has_the_password(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setenv("REDIS_PASSWORD", "from-the-shell")
    _hints(STACK, tmp_path / ".env")
    out = capsys.readouterr().out
    assert out.startswith("export SWARM_BROKER_URL=redis://:$REDIS_PASSWORD@127.0.0.1:24794/0")
    assert "from-the-shell" not in out and "set -a" not in out
