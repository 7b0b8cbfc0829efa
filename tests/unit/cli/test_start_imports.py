"""What the CLI loads to start. `swarm --help` loads every command module, so those import
light: no Celery, no OpenAI client, no aiohttp, no simulator (together most of a second
before any command ran), and for help not even pydantic, redis or rich. `swarm status` (a
job, or the per-model counters) and `swarm cost` load the job store and pydantic, still none
of the heavy four.

Each case runs in a fresh interpreter and lists sys.modules afterwards; nothing is timed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("celery", "kombu", "openai", "aiohttp", "httpx", "httpx2", "swarm.sim")
"""Loaded only by the commands that run jobs, call a gateway or serve the simulator."""
NOT_FOR_HELP = (*HEAVY, "pydantic", "pydantic_settings", "redis", "rich", "yaml")
"""Not loaded by the entry module and by any --help."""

RUN_CLI = """
import contextlib, io, sys
from swarm.cli.main import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main({args!r}, prog_name="swarm")
    except SystemExit as exc:
        assert exc.code in (0, None), exc.code
"""

REPORT: dict[str, object] = {
    "job_id": "job1",
    "status": "succeeded",
    "total": 1,
    "succeeded": 1,
    "failed": 0,
    "wall_s": 1.0,
    "final": "fine",
    "aggregate_model": "kimi-k2.5",
    "cost_usd": 0.0021,
    "usage": {"prompt_tokens": 1000, "completion_tokens": 1000, "cached_tokens": 0},
    "models": {
        "kimi-k2.5": {
            "calls": 2,
            "prompt_tokens": 1000,
            "completion_tokens": 1000,
            "cached_tokens": 0,
            "cost_usd": 0.0021,
        }
    },
    "nodes": [],
}

STORE_WITH_JOB = """
from swarm.records import JobSpec
from swarm.store import MemoryJobStore, RedisJobStore
store = MemoryJobStore()
spec = JobSpec(job_id="job1", instruction="i", aggregate_instruction="a", model="kimi-k2.5",
    aggregate_model="kimi-k2.5", node_ids=("n0",), input_refs=("input:0",), submitted_at=0.0)
store.create_job(spec, ["text"])
store.save_report("job1", {report!r})
RedisJobStore.from_settings = classmethod(lambda cls, settings: store)
"""
"""The job store `swarm status job1` and `swarm cost job1` read, in memory (the Redis one is
integration-tested; what matters here is which modules the commands' code loads)."""

COUNTERS_WITHOUT_REDIS = """
from swarm.calls.admission.base import ModelCounters
from swarm.calls.admission.redis import RedisAdmission
class Hashes:
    def hmget(self, key, fields):
        return [None] * len(fields)
class Counters:
    client = Hashes()
    def counters(self, spec):
        return ModelCounters(admitted=3)
    def adaptive_key(self, backend):
        return backend
RedisAdmission.from_url = classmethod(lambda cls, url, gateway, policy, *sentinel: Counters())
"""
"""The per-model counters bare `swarm status` reads, without a Redis (as above)."""


def loaded(code: str, **env: str) -> list[str]:
    """The modules loaded after running ``code`` in a fresh interpreter."""
    script = code + "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    environ = {**os.environ, **env}  # the autouse fixture removed the user's SWARM_*
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=environ, check=False
    )
    assert out.returncode == 0, out.stderr
    modules: list[str] = json.loads(out.stdout.splitlines()[-1])
    return modules


def among(modules: list[str], roots: tuple[str, ...]) -> list[str]:
    """The top-level packages of ``roots`` (and swarm.sim) found in ``modules``."""
    return sorted(
        {root for m in modules for root in roots if m == root or m.startswith(root + ".")}
    )


def test_the_entry_module_imports_light() -> None:
    assert among(loaded("import swarm.cli.main"), NOT_FOR_HELP) == []


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["status", "--help"],
        ["cost", "--help"],
        ["run", "--help"],
        ["demo", "--help"],
        ["review", "--help"],
        ["sim", "--help"],
        ["stack", "up", "--help"],
        ["bench", "--help"],
        ["probe", "--help"],
    ],
)
def test_help_imports_light(args: list[str]) -> None:
    assert among(loaded(RUN_CLI.format(args=args)), NOT_FOR_HELP) == []


@pytest.mark.parametrize("args", [["status", "job1"], ["status", "job1", "--json"]])
def test_status_of_a_job_loads_no_celery_openai_or_simulator(args: list[str]) -> None:
    code = STORE_WITH_JOB.format(report=REPORT) + RUN_CLI.format(args=args)
    modules = loaded(code, SWARM_BROKER_URL="redis://127.0.0.1:1/0")
    assert among(modules, HEAVY) == []
    assert "swarm.cli.status_view" in modules  # the job's report was shown


@pytest.mark.parametrize("args", [["status"], ["status", "--models", "--json"]])
def test_status_counters_load_no_celery_openai_or_simulator(args: list[str]) -> None:
    code = COUNTERS_WITHOUT_REDIS + RUN_CLI.format(args=args)
    environ = {"SWARM_BROKER_URL": "redis://127.0.0.1:1/0", "SWARM_BASE_URL": "http://gw/v1"}
    modules = loaded(code, **environ)
    assert among(modules, HEAVY) == []
    assert "swarm.cli.models_view" in modules


def test_cost_of_a_job_loads_no_celery_openai_or_simulator() -> None:
    code = STORE_WITH_JOB.format(report=REPORT) + RUN_CLI.format(args=["cost", "job1"])
    modules = loaded(code, SWARM_BROKER_URL="redis://127.0.0.1:1/0")
    assert among(modules, HEAVY) == []
    assert "swarm.cost.projections" in modules


def test_cost_of_a_report_file_loads_no_celery_openai_or_simulator(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    path.write_text(json.dumps(REPORT), "utf-8")
    modules = loaded(RUN_CLI.format(args=["cost", str(path), "--json"]))
    assert among(modules, HEAVY) == []
    assert "swarm.cost.projections" in modules


def test_import_swarm_is_light_and_its_names_load_on_use() -> None:
    assert among(loaded("import swarm"), NOT_FOR_HELP) == []
    code = "from swarm import SwarmClient, tool\nassert SwarmClient.__name__ == 'SwarmClient'"
    assert "celery" in among(loaded(code), HEAVY)  # the producer API is the real one
