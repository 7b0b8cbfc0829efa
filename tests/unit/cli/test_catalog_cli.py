"""A bad catalog through the real `swarm` command: one line on stderr naming the field and
its table, exit status 2, no traceback, whether the job would run embedded or on a broker
(the catalog is read before anything is reached)."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

SWARM = str(Path(sys.executable).with_name("swarm"))
PACKAGED = resources.files("swarm.data").joinpath("catalog.toml").read_text("utf-8")


@pytest.mark.parametrize(
    ("old", "new", "line"),
    [
        (
            "rpm = 4800",
            'rpm = "4800"',
            "rpm in [models.\"kimi-k2.5\"]: Input should be a valid integer, not the string '4800'",
        ),
        (
            "max_inflight = 100",
            "max_inflght = 100",
            'unknown field max_inflght in [models."kimi-k2.5"] (did you mean max_inflight?)',
        ),
        (
            "summarize = [",
            "sumarize = [",
            "unknown routing kind sumarize in [routing] (did you mean summarize?)",
        ),
    ],
)
@pytest.mark.parametrize("broker", [False, True], ids=["embedded", "broker"])
def test_bad_catalog_is_one_line_from_the_cli(
    tmp_path: Path, old: str, new: str, line: str, broker: bool
) -> None:
    assert old in PACKAGED
    bad = tmp_path / "bad.toml"
    bad.write_text(PACKAGED.replace(old, new, 1))
    (tmp_path / "a.txt").write_text("some input")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SWARM_", "OPENAI_"))}
    env["SWARM_CONFIG"] = str(bad)
    args = [SWARM, "run", "a.txt", "--simulate"]
    if broker:  # nothing listens there: the catalog must fail first
        env |= {
            "SWARM_BROKER_URL": "redis://127.0.0.1:9/0",
            "SWARM_BASE_URL": "http://127.0.0.1:9/v1",
        }
        args.remove("--simulate")
    done = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr == f"swarm: invalid model catalog {bad}: {line}\n"
    assert done.stdout == ""
