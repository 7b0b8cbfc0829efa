"""The job options reach a command as one JobFlags record, checked before anything is sent."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import click
import pytest
from click.testing import CliRunner

from swarm.cli.decorators import JobFlags, job_options
from swarm.errors import InputError


def _flags(args: list[str]) -> JobFlags:
    seen: list[JobFlags] = []

    @click.command()
    @click.argument("name")
    @job_options
    def command(name: str, job: JobFlags) -> None:
        assert name == "x"
        seen.append(job)

    result = CliRunner().invoke(command, ["x", *args], env={"SWARM_TENANT": None})
    assert result.exit_code == 0, result.output
    return seen[0]


def test_the_command_gets_the_options_as_one_record() -> None:
    given = ["--json", "--no-wait", "--budget-usd", "2.5", "--timeout", "9", "--tenant", "t1"]
    assert _flags(given) == JobFlags(
        as_json=True,
        no_wait=True,
        simulate=False,
        budget_usd=2.5,
        strict=False,
        timeout_s=9.0,
        tenant="t1",
    )


def test_without_options_the_record_holds_the_defaults() -> None:
    assert _flags([]) == JobFlags(False, False, False, None, False, None, "default")


@pytest.mark.parametrize(
    ("changed", "named"),
    [
        ({"budget_usd": -1.0}, "budget"),
        ({"timeout_s": 0.0}, "--timeout"),
        ({"tenant": "a b"}, "tenant"),
    ],
)
def test_check_refuses_each_bad_option(changed: dict[str, Any], named: str) -> None:
    good = _flags([])
    good.check()
    with pytest.raises(InputError, match=named):
        replace(good, **changed).check()
