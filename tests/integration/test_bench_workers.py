"""The benches' workers run the tree their PYTHONPATH names, even when the bench runs from
the checkout (swarm.bench.procs.workers): side-by-side arms compare two trees, not one."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from swarm.bench import procs
from swarm.bench.overhead import QUEUE

ROOT = Path(__file__).resolve().parents[2]


def test_a_worker_imports_the_tree_its_pythonpath_names(
    redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = tmp_path / "tree"
    for package in ("swarm", "workers"):
        shutil.copytree(ROOT / package, tree / package, ignore=shutil.ignore_patterns("*.pyc"))
    seen = tmp_path / "imported-from"
    marker = f"\nopen({str(seen)!r}, 'w').write(__file__)\n"
    with (tree / "workers" / "__init__.py").open("a") as init:
        init.write(marker)
    monkeypatch.chdir(ROOT)  # where a bench runs from: the checkout's packages are here
    env = {
        "PYTHONPATH": str(tree),
        "SWARM_BROKER_URL": redis_url,
        "SWARM_BASE_URL": "http://127.0.0.1:9/v1",
        "SWARM_API_KEY": "bench-not-a-key",
    }
    folder = tmp_path / "bench"
    folder.mkdir()
    with procs.workers(folder, env, 1, 2, QUEUE):
        assert seen.read_text() == str(tree / "workers" / "__init__.py")
