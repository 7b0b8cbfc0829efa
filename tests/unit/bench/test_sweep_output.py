"""The sweep table's verdict line: each client's worst point against the baseline's best."""

from __future__ import annotations

from swarm.bench.output import sweep_markdown
from swarm.bench.sweep import Row


def row(client: str, c: int, tps: float, success: float = 100.0) -> Row:
    return Row(client, c, 800, 1200.0, 2400.0, success, tps, 0)


def test_the_verdict_compares_every_point_with_the_baselines_best() -> None:
    rows = [
        row("baseline", 20, 15.0),
        row("swarm", 20, 44.0),
        row("baseline", 100, 40.0, success=99.5),
        row("swarm", 100, 41.0),
        row("swarm, in flight <= C", 20, 15.5),
        row("swarm, in flight <= C", 100, 40.5),
    ]
    text = sweep_markdown(rows)
    assert "baseline's best: 40.0 tasks/s (C=100)." in text
    assert "swarm: lowest 41.0 tasks/s (C=100), at or above the baseline's best; success " in text
    assert "swarm, in flight <= C: lowest 15.5 tasks/s (C=20), below the baseline's best" in text
    assert text.count("| swarm |") == 2
