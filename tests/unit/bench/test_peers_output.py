"""The peers table: both clients per gateway, every round, and whether the targets hold."""

from __future__ import annotations

from swarm.bench.output import peers_markdown
from swarm.bench.peers import ROWS, Result, Run


def test_each_row_shows_both_clients_and_its_verdict() -> None:
    clean, _, _, capped, _ = ROWS
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
