"""Bad input (CLI side): each bad input or setting is one line on stderr, exit 2,
no traceback, and nothing is submitted (no broker is configured, or none is reachable)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from swarm.cli.main import main

CLEAN = ("SWARM_BROKER_URL", "SWARM_BASE_URL", "SWARM_API_KEY", "OPENAI_API_KEY", "SWARM_CONFIG")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in CLEAN:
        monkeypatch.delenv(name, raising=False)


def write(tmp_path: Path, name: str, data: bytes) -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


CATALOG_SYNTAX = b'[models."kimi-k2.5"\ngateway_name = "kimi-k2.5"\n'
CATALOG_NEGATIVE_PRICE = b"""
[models."m"]
gateway_name = "m"
queue = "llm.m"
input_per_mtok_usd = -1.0
output_per_mtok_usd = 1.0
rpm = 10
tpm = 1000
max_inflight = 1
context_window = 1000
max_tokens = 100

[routing]
default = ["m"]
aggregate = ["m"]
"""

CASES = [
    # (name, argv (FILE = a good input file), files {name: bytes}, env, expected text)
    (
        "empty file",
        ["run", "{empty.txt}", "--simulate"],
        {"empty.txt": b"  \n\n"},
        {},
        "empty file",
    ),
    ("binary file", ["run", "{x.bin}", "--simulate"], {"x.bin": b"\x7fELF\x00\x01"}, {}, "binary"),
    (
        "not UTF-8",
        ["run", "{latin1.txt}", "--simulate"],
        {"latin1.txt": "caf\xe9 cr\xe8me".encode("latin-1")},
        {},
        "not UTF-8",
    ),
    ("directory", ["run", "{.}", "--simulate"], {}, {}, "is a directory"),
    ("missing file", ["run", "{missing.txt}", "--simulate"], {}, {}, "cannot read"),
    ("no inputs", ["run", "--simulate"], {}, {}, "no inputs"),
    ("empty stdin", ["run", "-", "--simulate"], {}, {}, "no inputs"),
    ("unknown kind", ["run", "FILE", "--simulate", "--kind", "astrology"], {}, {}, "astrology"),
    ("unknown model", ["run", "FILE", "--simulate", "--model", "gpt-9"], {}, {}, "gpt-9"),
    ("zero budget", ["run", "FILE", "--simulate", "--budget-usd", "0"], {}, {}, "budget"),
    ("negative budget", ["run", "FILE", "--simulate", "--budget-usd", "-2"], {}, {}, "budget"),
    ("NaN budget", ["run", "FILE", "--simulate", "--budget-usd", "nan"], {}, {}, "budget"),
    ("zero timeout", ["run", "FILE", "--simulate", "--timeout", "0"], {}, {}, "--timeout"),
    ("bad tenant", ["run", "FILE", "--simulate", "--tenant", "team a"], {}, {}, "invalid tenant"),
    ("bad tenant env", ["run", "FILE", "--simulate"], {}, {"SWARM_TENANT": "-x"}, "'-x'"),
    ("negative timeout", ["run", "FILE", "--simulate", "--timeout", "-5"], {}, {}, "--timeout"),
    (
        "negative node timeout",
        ["run", "FILE", "--simulate"],
        {},
        {"SWARM_NODE_TIMEOUT_S": "-1"},
        "SWARM_NODE_TIMEOUT_S",
    ),
    (
        "visibility timeout below the longest task",
        ["run", "FILE", "--simulate"],
        {},
        {"SWARM_VISIBILITY_TIMEOUT_S": "30"},
        "visibility_timeout_s",
    ),
    (
        "malformed catalog",
        ["run", "FILE", "--simulate"],
        {"bad.toml": CATALOG_SYNTAX},
        {"SWARM_CONFIG": "{bad.toml}"},
        "catalog",
    ),
    (
        "invalid catalog field",
        ["run", "FILE", "--simulate"],
        {"neg.toml": CATALOG_NEGATIVE_PRICE},
        {"SWARM_CONFIG": "{neg.toml}"},
        "input_per_mtok_usd",
    ),
    ("resume without a broker", ["resume", "0" * 32], {}, {}, "SWARM_BROKER_URL"),
]


@pytest.mark.parametrize(
    ("argv", "files", "env", "expected"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_bad_input_is_one_line(
    tmp_path: Path, argv: list[str], files: dict[str, bytes], env: dict[str, str], expected: str
) -> None:
    paths = {name: write(tmp_path, name, data) for name, data in files.items()}
    paths["."] = str(tmp_path)
    paths["missing.txt"] = str(tmp_path / "missing.txt")
    good = write(tmp_path, "good.txt", b"a good input")

    def fill(text: str) -> str:
        for name, path in paths.items():
            text = text.replace("{" + name + "}", path)
        return good if text == "FILE" else text

    result = CliRunner().invoke(
        main, [fill(a) for a in argv], env={k: fill(v) for k, v in env.items()}, input=""
    )
    assert result.exit_code == 2, (result.output, result.exception)
    err = result.stderr
    assert err.startswith("swarm: ") and expected in err, err
    assert err.count("\n") == 1 and "Traceback" not in err
