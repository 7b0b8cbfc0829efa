"""The peers table: both clients per gateway, every round, and whether the targets hold."""

from __future__ import annotations

import pytest

from swarm.bench.output import peers_markdown
from swarm.bench.peers import ROWS, Result, Run, merge_table, pick_rows


def test_each_row_shows_both_clients_and_its_verdict() -> None:
    clean, capped = ROWS[0], ROWS[3]
    results = [
        Result(clean, [Run(100, 100, 1.0, 0)], [Run(100, 100, 1.4, 0)]),
        Result(capped, [Run(100, 100, 60.0, 40)], [Run(100, 100, 73.0, 0)]),
    ]
    text = peers_markdown(results)
    line = "| clean, 0.2 s | 100/100, 1.0 s, 0 x 429 | 100/100, 1.4 s, 0 x 429 | 1.40x | yes |"
    assert line in text
    assert "| 1.22x | no: wall > 1.2x |" in text


def test_fewer_successes_or_as_many_429s_miss_the_target() -> None:
    capped = ROWS[3]
    worse = Result(capped, [Run(100, 100, 60.0, 40)], [Run(99, 100, 60.0, 40)])
    assert "no: fewer successes, not fewer 429s |" in peers_markdown([worse])


def test_rows_are_picked_by_number_or_name() -> None:
    assert pick_rows("") == list(ROWS)
    fast = pick_rows("fast-errors")
    assert [gw.key for gw in fast] == ["fast-errors"]
    assert "--fast-errors" in fast[0].sim_args
    assert pick_rows("1,rpm-cap") == [ROWS[0], ROWS[3]]
    with pytest.raises(ValueError, match="unknown row '9'"):
        pick_rows("9")
    assert len({gw.key for gw in ROWS}) == len(ROWS)


def test_a_rerun_row_replaces_its_line_and_keeps_the_others() -> None:
    clean, capped, fast = ROWS[0], ROWS[3], ROWS[-1]
    before = peers_markdown(
        [
            Result(clean, [Run(100, 100, 1.0, 0)], [Run(100, 100, 1.1, 0)]),
            Result(capped, [Run(100, 100, 60.0, 40)], [Run(100, 100, 61.0, 0)]),
        ]
    )
    again = peers_markdown([Result(clean, [Run(100, 100, 2.0, 0)], [Run(100, 100, 2.2, 0)])])
    merged = merge_table(before, again)
    assert merged.splitlines()[:2] == before.splitlines()[:2]
    assert "100/100, 2.0 s" in merged and "100/100, 1.0 s" not in merged
    assert "100/100, 60.0 s" in merged
    added = merge_table(
        merged, peers_markdown([Result(fast, [Run(88, 100, 9.0, 50)], [Run(64, 100, 5.0, 40)])])
    )
    names = [line.split("|")[1].strip() for line in added.splitlines()[2:]]
    assert names == [clean.name, capped.name, fast.name]
    assert merge_table("", again) == again
