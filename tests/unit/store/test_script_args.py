"""Every Lua script has one typed argument record, and the record matches the script's
header: same KEYS and ARGV names, in the same order."""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

import pytest

from swarm.calls.admission.script_args import ADMISSION_SCRIPTS, AcquireArgs, LeaseKeys
from swarm.store.script_args import (
    STORE_SCRIPTS,
    CallLine,
    LedgerKeys,
    RecordArgs,
)
from swarm.store.scripts import ScriptArgs, script_text, source

RECORDS = (*STORE_SCRIPTS, *ADMISSION_SCRIPTS)

_HEADER_LINE = re.compile(r"^-- (KEYS|ARGV)\[(\d+)(\.\.)?\] (\w+)", re.MULTILINE)


@dataclass(frozen=True)
class Header:
    """The argument names a script's header declares, in order."""

    keys: tuple[str, ...]
    argv: tuple[str, ...]
    variadic: str | None = None
    """Name of the ARGV tail that takes any number of values (``ARGV[n..]``)."""


def parse_header(text: str) -> Header:
    """The KEYS and ARGV names of a script, from its header lines."""
    keys: list[str] = []
    argv: list[str] = []
    variadic = None
    for kind, index, rest, name in _HEADER_LINE.findall(text):
        names = keys if kind == "KEYS" else argv
        if int(index) != len(names) + 1:
            raise ValueError(f"{kind}[{index}] {name}: expected {kind}[{len(names) + 1}]")
        names.append(name)
        if rest:
            variadic = name
    return Header(tuple(keys), tuple(argv), variadic)


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: f"{r.PACKAGE}:{r.SCRIPT}")
def test_each_record_matches_its_scripts_header(record: type[ScriptArgs]) -> None:
    header = parse_header(script_text(record.PACKAGE, record.SCRIPT))
    keys, argv = record.names()
    assert header.keys == keys
    assert header.argv == argv


@pytest.mark.parametrize("package", ["swarm.store", "swarm.calls.admission"])
def test_every_script_file_has_a_record(package: str) -> None:
    scripts = resources.files(package).joinpath("lua").iterdir()
    files = {p.name.removesuffix(".lua") for p in scripts if p.name.endswith(".lua")}
    assert files == {r.SCRIPT for r in RECORDS if package == r.PACKAGE}


def test_the_header_parser_reads_names_in_order_and_rejects_gaps() -> None:
    text = "-- KEYS[1] a: hash\n-- ARGV[1] x\n-- ARGV[2..] rest: pairs\nlocal a = 1\n"
    header = parse_header(text)
    assert (header.keys, header.argv, header.variadic) == (("a",), ("x", "rest"), "rest")
    with pytest.raises(ValueError, match="expected ARGV"):
        parse_header("-- ARGV[1] x\n-- ARGV[3] y\n")


def test_a_variadic_tail_is_flattened_after_the_fixed_values() -> None:
    args = AcquireArgs(
        LeaseKeys(*"abcd"), *"efghi", "lease", "job", 10, 1000, 5, 100.0, 50.0, 0.1, 1.0, 0.0,
        1000.0, "team-a", 3.0, 40, 60000.0,
        limits=(("rpm", 60, 60000, 1, 1), ("tpm", 1000, 60000, 10, 0)),
    )  # fmt: skip
    assert args.keys() == list("abcdefghi")
    assert args.argv()[-10:] == ["rpm", 60, 60000, 1, 1, "tpm", 1000, 60000, 10, 0]
    assert len(args.argv()) == 15 + 10


_DEFINED = re.compile(r"^local function (\w+)\(", re.MULTILINE)


def _prelude_functions(package: str) -> dict[str, str]:
    """Function name -> the prelude (``lua/lib/<name>.lua``) that defines it."""
    lib = resources.files(package).joinpath("lua/lib")
    return {
        function: p.name.removesuffix(".lua")
        for p in lib.iterdir()
        for function in _DEFINED.findall(p.read_text("utf-8"))
    }


@pytest.mark.parametrize("record", STORE_SCRIPTS, ids=lambda r: r.SCRIPT)
def test_a_script_runs_after_the_preludes_of_every_function_it_calls(
    record: type[ScriptArgs],
) -> None:
    own = script_text(record.PACKAGE, record.SCRIPT)
    called = {
        prelude
        for function, prelude in _prelude_functions(record.PACKAGE).items()
        if re.search(rf"\b{function}\(", own)
    }
    assert called == set(record.PRELUDES)
    preludes = [script_text(record.PACKAGE, f"lib/{name}") for name in record.PRELUDES]
    assert source(record) == "\n".join([*preludes, own])


def test_every_prelude_is_used_and_the_ledger_write_lives_in_one() -> None:
    used = {name for record in STORE_SCRIPTS for name in record.PRELUDES}
    assert used == set(_prelude_functions("swarm.store").values())
    own = {r.SCRIPT: script_text(r.PACKAGE, r.SCRIPT) for r in STORE_SCRIPTS}
    assert [name for name, text in own.items() if "|calls'" in text] == []
    assert "|calls'" in script_text("swarm.store", "lib/ledger")


def test_a_script_part_is_flattened_in_its_place() -> None:
    args = RecordArgs(
        LedgerKeys("b", "l", "g", "a"), "f", CallLine("c1", "m", 1, 2, 3, 4, 5), "k", "{}", 60, ""
    )
    assert args.keys() == ["b", "l", "g", "a", "f"]
    assert args.argv() == ["c1", "m", 1, 2, 3, 4, 5, "k", "{}", 60, ""]
    keys, argv = RecordArgs.names()
    assert keys == ("billed", "ledger", "budget", "answers", "fence")
    assert argv[:7] == (
        "call_id",
        "model",
        "prompt_tokens",
        "completion_tokens",
        "cached_tokens",
        "reasoning_tokens",
        "cost_nusd",
    )
