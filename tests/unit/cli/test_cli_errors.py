"""Bad input and configuration: one line on stderr, a non-zero exit, no traceback."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

from swarm.cli.main import main

CLEAN = {
    k: ""
    for k in (
        "SWARM_BROKER_URL",
        "SWARM_BASE_URL",
        "SWARM_API_KEY",
        "OPENAI_API_KEY",
        "SWARM_CONFIG",
    )
}


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    for name in CLEAN:
        monkeypatch.delenv(name, raising=False)
    return {}


@pytest.fixture
def text_file(tmp_path: Path) -> str:
    f = tmp_path / "a.txt"
    f.write_text("some input")
    return str(f)


def invoke(args: list[str], env: dict[str, str], stdin: str | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(main, args, env=env, input=stdin)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stderr


@pytest.mark.parametrize(
    ("args", "extra_env", "message"),
    [
        (["run"], {}, "no inputs"),
        (["run", "{file}", "--instruction", "  "], {}, "instruction is empty"),
        (
            ["run", "{file}", "--model", "gpt-9"],
            {"SWARM_BASE_URL": "http://x/v1", "SWARM_API_KEY": "k"},
            "unknown model",
        ),
        (["run", "{file}"], {}, "SWARM_BASE_URL is not set"),
        (["run", "{file}"], {"SWARM_BASE_URL": "http://127.0.0.1:9/v1"}, "SWARM_API_KEY"),
        (
            ["run", "{file}"],
            {"SWARM_BASE_URL": "http://127.0.0.1:9/v1", "SWARM_API_KEY": "YOUR_HOLYSHEEP_API_KEY"},
            "placeholder",
        ),
        (
            ["run", "{file}"],
            {"SWARM_BASE_URL": "http://127.0.0.1:{port}/v1", "SWARM_API_KEY": "k"},
            "cannot reach the gateway",
        ),
        (
            ["run", "{file}"],
            {
                "SWARM_BROKER_URL": "redis://127.0.0.1:{port}/0",
                "SWARM_BASE_URL": "http://127.0.0.1:9/v1",
                "SWARM_API_KEY": "k",
            },
            "cannot reach Redis",
        ),
        (["run", "{file}", "--no-wait", "--simulate"], {}, "--no-wait needs SWARM_BROKER_URL"),
        (
            ["run", "{file}", "--simulate"],
            {"SWARM_BROKER_URL": "redis://127.0.0.1:{port}/0"},
            "--simulate runs in embedded mode only",
        ),
        (["status", "abc"], {}, "needs SWARM_BROKER_URL"),
        (["run", "{file}"], {"SWARM_CONFIG": "/nonexistent/cat.toml"}, "cannot read model catalog"),
        (["run", "{file}"], {"SWARM_NODE_TIMEOUT_S": "0"}, "SWARM_NODE_TIMEOUT_S"),
    ],
)
def test_one_line_errors(
    args: list[str], extra_env: dict[str, str], message: str, env: dict[str, str], text_file: str
) -> None:
    port = str(closed_port())
    args = [a.replace("{file}", text_file) for a in args]
    full_env = {k: v.replace("{port}", port) for k, v in {**env, **extra_env}.items()}
    code, err = invoke(args, full_env)
    assert code == 2
    assert err.startswith("swarm: ") and message in err, err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_binary_input_file(env: dict[str, str], tmp_path: Path) -> None:
    f = tmp_path / "x.bin"
    f.write_bytes(b"\x00\x01\x02")
    code, err = invoke(["run", str(f), "--simulate"], env)
    assert code == 2 and "binary file" in err


def test_rejected_key_is_reported_before_anything_runs(env: dict[str, str], text_file: str) -> None:
    from swarm.sim import SimConfig, start_in_thread

    with start_in_thread(SimConfig(api_key="the-right-key")) as sim:
        code, err = invoke(
            ["run", text_file], {"SWARM_BASE_URL": sim.base_url, "SWARM_API_KEY": "wrong"}
        )
        assert code == 2 and "rejected the API key" in err
        assert sim.stats()["requests"] == 0
