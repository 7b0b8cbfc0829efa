"""`-h`, a command list that never cuts a description, the same options on the job
commands, and tables readable when piped."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from swarm.cli.main import main
from swarm.cli.models_view import print_models
from swarm.cli.render import stdout_console


@pytest.mark.parametrize("args", [["-h"], ["run", "-h"], ["status", "-h"], ["jobs", "-h"]])
def test_dash_h_is_help(args: list[str]) -> None:
    done = CliRunner().invoke(main, args)
    assert done.exit_code == 0, done.output
    assert done.output.startswith("Usage: ")


def test_the_command_list_shows_whole_sentences() -> None:
    out = CliRunner().invoke(main, ["--help"], terminal_width=80).output
    commands = out.split("Commands:")[1]
    assert "..." not in commands
    for name in ("jobs", "cancel", "status", "run", "review", "analyze", "resume", "cost"):
        assert f"\n  {name} " in commands


@pytest.mark.parametrize("command", ["run", "review", "analyze", "resume"])
def test_job_commands_share_their_waiting_options(command: str) -> None:
    out = CliRunner().invoke(main, [command, "--help"], terminal_width=200).output
    for option in ("--json", "--no-wait", "--timeout", "--budget-usd", "--strict"):
        assert option in out, (command, option)


@pytest.mark.parametrize("command", ["run", "review"])
def test_priced_commands_take_max_tokens_and_force(command: str) -> None:
    out = CliRunner().invoke(main, [command, "--help"], terminal_width=200).output
    assert "--max-tokens" in out and "--force" in out


def test_model_counters_have_whole_headers_when_piped(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    row = {
        "admitted": 12, "waiting": 0, "rate_limited": 3, "pauses": 1, "factor": 0.5,
        "inflight": 4, "paused_for_s": 0.0, "expired": 0,
    }  # fmt: skip
    print_models({"models": {"claude-sonnet-4.5": row}, "backends": {}}, stdout_console())
    out = capsys.readouterr().out
    for head in ("admitted", "waiting", "429s", "pauses", "rate factor", "in flight", "pause s"):
        assert head in out
    assert "…" not in out


def test_the_review_kind_the_renderer_knows_is_the_review_modules() -> None:
    from swarm.cli import render
    from swarm.jobs.review import REVIEW_KIND

    assert render.REVIEW_KIND == REVIEW_KIND
    review = {"nodes": [{"kind": REVIEW_KIND}]}
    assert render.render_for(review) is render.print_review
    assert render.render_for({"nodes": [{"kind": "default"}]}) is render.print_report


def test_ctrl_c_outside_a_wait_is_one_line_and_130(monkeypatch: pytest.MonkeyPatch) -> None:
    import swarm.settings

    def interrupted(**_: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(swarm.settings, "load_settings", interrupted)
    done = CliRunner().invoke(main, ["jobs"])
    assert done.exit_code == 130
    assert done.output.strip() == "swarm: interrupted" and "Aborted" not in done.output
