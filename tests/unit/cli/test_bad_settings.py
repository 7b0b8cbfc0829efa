"""Settings and arguments a newcomer gets wrong: each is one line naming the variable or
the argument, exit 2, no traceback, nothing submitted."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from swarm.cli.main import main

CLEAN = ("SWARM_BROKER_URL", "SWARM_BASE_URL", "SWARM_API_KEY", "OPENAI_API_KEY", "SWARM_CONFIG")
NOWHERE = "http://127.0.0.1:1/v1"
"""A gateway nothing answers at (a refusal that gets this far says `cannot reach`)."""


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in CLEAN:
        monkeypatch.delenv(name, raising=False)


def refusal(argv: list[str], env: dict[str, str]) -> str:
    result = CliRunner().invoke(main, argv, env=env, input="")
    assert result.exit_code == 2, (result.output, result.exception)
    err = result.stderr
    assert err.startswith("swarm: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err.strip()


@pytest.fixture
def text_file(tmp_path: Path) -> str:
    path = tmp_path / "in.txt"
    path.write_text("an input")
    return str(path)


@pytest.mark.parametrize("command", ["run", "status"])
def test_a_broker_url_that_is_not_one_names_the_variable_and_the_schemes(
    command: str, text_file: str
) -> None:
    argv = ["run", text_file] if command == "run" else ["status", "job-1"]
    env = {"SWARM_BROKER_URL": "notaurl", "SWARM_BASE_URL": NOWHERE, "SWARM_API_KEY": "k"}
    err = refusal(argv, env)
    assert "SWARM_BROKER_URL" in err and "redis://" in err and "amqp://" in err


def test_a_gateway_url_of_another_scheme_names_it(text_file: str) -> None:
    err = refusal(["run", text_file], {"SWARM_BASE_URL": "ftp://x", "SWARM_API_KEY": "k"})
    assert "SWARM_BASE_URL" in err and "ftp://" in err and "http:// or https://" in err


@pytest.mark.parametrize("key", ["", "changeme"])
def test_an_empty_key_and_a_placeholder_are_refused_alike(text_file: str, key: str) -> None:
    err = refusal(["run", text_file], {"SWARM_BASE_URL": NOWHERE, "SWARM_API_KEY": key})
    assert err == (
        "swarm: SWARM_API_KEY (or OPENAI_API_KEY) is set but empty or a placeholder: set the "
        "gateway's key, or unset the variable for a server that needs none"
    )


@pytest.mark.parametrize("command", ["status", "cancel", "resume", "cost"])
def test_a_long_job_id_is_not_echoed_back_whole(command: str) -> None:
    # A broker nothing answers at: a refusal after the argument would be `cannot reach`.
    err = refusal([command, "j" * 10_000], {"SWARM_BROKER_URL": "redis://127.0.0.1:1/0"})
    assert err == (
        f"swarm: '{'j' * 32}\u2026' (10000 characters) is not a job id: job ids are at most "
        "128 printable characters (`swarm jobs` lists the recent ones)"
    )


def test_a_max_tokens_the_window_cannot_hold_is_refused_before_anything_starts(
    text_file: str,
) -> None:
    err = refusal(["run", text_file, "--simulate", "--max-tokens", "10000000"], {})
    assert err == (
        "swarm: max_tokens 10,000,000 (--max-tokens) does not fit kimi-k2.5's context window "
        "of 262,144 tokens, which also holds the input: at most 261,888"
    )
