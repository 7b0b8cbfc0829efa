"""End to end: `swarm stack up` starts docker-compose.yml's services as local processes
(redis-server, Flower, three worker services, the simulator), three swarms run through it, and
the operator's views are checked: Flower's HTTP API (basic auth, workers and queues, tasks and
their safe summaries), each worker's Prometheus endpoint, and no API key anywhere."""

from __future__ import annotations

import base64
import gc
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import procs
import redis
from prometheus_client.parser import text_string_to_metric_families

from swarm.client import SwarmClient
from swarm.records import InputItem
from swarm.settings import Settings
from swarm.stack.state import ProcessState, alive
from workers.health import node_alive, node_name

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-stack-e2e-" + os.urandom(8).hex()
REDIS_PASSWORD = os.urandom(12).hex()
FLOWER_AUTH = ("ops", os.urandom(6).hex())
PROMPT_MARK = "PROMPT-TEXT-NOT-FOR-FLOWER"
QUEUES = {
    "worker-fast": {"llm.gemini-2.5-flash", "llm.deepseek-v3.2"},
    "worker-reason": {"llm.claude-sonnet-4.5", "llm.gpt-4.1"},
    "worker-aggregate": {"llm.kimi-k2.5"},
}
# kind -> (sub-agent model, the worker service that serves it)
JOBS = {
    "extract": ("gemini-2.5-flash", "worker-fast"),
    "reason": ("claude-sonnet-4.5", "worker-reason"),
    "default": ("kimi-k2.5", "worker-aggregate"),
}
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _stack(run_dir: Path, *args: str, timeout: float = 150) -> str:
    env = {
        **os.environ,
        "REDIS_PASSWORD": REDIS_PASSWORD,
        "FLOWER_USER": FLOWER_AUTH[0],
        "FLOWER_PASSWORD": FLOWER_AUTH[1],
        "SWARM_STACK_API_KEY": KEY,  # the workers' key (SWARM_API_KEY inside)
        "SIM_LATENCY_P50_MS": "20",
        "SIM_LATENCY_P99_MS": "80",
        "WORKER_FAST_CONCURRENCY": "4",
        "WORKER_REASON_CONCURRENCY": "4",
        "WORKER_AGGREGATE_CONCURRENCY": "8",
    }
    argv = [sys.executable, "-m", "swarm.cli.main", "stack", *args, "--dir", str(run_dir)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _get(url: str, auth: bool = True) -> tuple[int, str]:
    request = urllib.request.Request(url)
    if auth:
        token = base64.b64encode(":".join(FLOWER_AUTH).encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with _OPENER.open(request, timeout=15) as resp:
            return int(resp.status), resp.read().decode()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read().decode()


def _poll(fetch: Any, done: Any, timeout_s: float = 45) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = fetch()
        if done(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.3)


def _metric(text: str, name: str, model: str) -> float:
    return sum(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name and s.labels.get("model") == model
    )


def _redis_dump(client: Any) -> str:
    """Every key and value of the current db as text (strings, hashes, lists, sets, zsets)."""
    parts = []
    for key in client.scan_iter(count=1000):
        kind = client.type(key)
        read = {
            "string": client.get,
            "hash": client.hgetall,
            "list": lambda k: client.lrange(k, 0, -1),
            "set": client.smembers,
            "zset": lambda k: client.zrange(k, 0, -1),
        }.get(kind, lambda k: "")
        parts.append(f"{key}={read(key)!r}")
    return "\n".join(parts)


def test_local_stack_runs_swarms_seen_through_flower_and_metrics(tmp_logs: Path) -> None:
    if shutil.which("redis-server") is None:
        procs.unavailable("redis-server is not installed (the local stack starts its own)")
    run_dir = tmp_logs / "stack"  # under tmp_logs: process logs are shown if the test fails
    empty_env = tmp_logs / "empty.env"
    empty_env.write_text("")
    up = ["up", "-f", str(ROOT / "docker-compose.yml"), "--env-file", str(empty_env)]
    up += ["--with-sim", "--replicas", "worker-fast=2", "--json"]
    started = {p["name"]: p for p in json.loads(_stack(run_dir, *up))}
    try:
        assert set(started) == {
            "redis-1", "sim-1", "flower-1", "worker-fast-1", "worker-fast-2",
            "worker-reason-1", "worker-aggregate-1",
        }  # fmt: skip
        settings = Settings(
            broker_url=f"redis://:{REDIS_PASSWORD}@127.0.0.1:{started['redis-1']['port']}/0",
            base_url=f"http://127.0.0.1:{started['sim-1']['port']}/v1",
            api_key=KEY,  # type: ignore[arg-type]
        )
        jobs = _run_swarms(settings)
        # The chord's AsyncResults unsubscribe from Redis when collected: let that happen
        # now, while Redis runs, not at exit after `down` (kombu would retry for seconds).
        gc.collect()
        _check_flower(f"http://127.0.0.1:{started['flower-1']['port']}", jobs)
        _check_metrics(started)
        _check_redis(started["redis-1"]["port"])
        # The container healthcheck's probe reaches a local replica by its node name (asked
        # until it answers: a busy machine can make a reply miss one ping's window).
        node, broker = node_name("worker-fast-2@%h"), settings.broker_url or ""
        assert _poll(lambda: node_alive(broker, node, timeout_s=2.0), bool)
    finally:
        stopped = _stack(run_dir, "down")
    assert "stopped 7 process(es)" in stopped
    assert not [p for p in started.values() if _alive(p)]
    assert "no stack" in _stack(run_dir, "status")
    # Nothing any service wrote holds the key: logs, and Redis's append-only file.
    written = [f for f in run_dir.rglob("*") if f.is_file()]
    assert any("appendonly" in str(f) for f in written)
    assert not [f for f in written if KEY.encode() in f.read_bytes()]


def _alive(proc: dict[str, Any]) -> bool:
    return alive(ProcessState.model_validate({k: v for k, v in proc.items() if k != "running"}))


def _run_swarms(settings: Settings) -> dict[str, str]:
    """One small swarm per worker service; the job ids by kind, once all succeeded."""
    client = SwarmClient.from_settings(settings)
    handles = {
        kind: client.submit(
            [InputItem(ref=f"{kind}-{i}", text=f"{PROMPT_MARK} {kind} {i}") for i in range(4)],
            "Find the problems",
            kind=kind,
        )
        for kind in JOBS
    }
    for kind, handle in handles.items():
        report = handle.wait(timeout=90).to_dict()
        assert report["status"] == "succeeded", (kind, report.get("error"))
        assert report["nodes"][0]["model"] == JOBS[kind][0]
    client.app.close()
    return {kind: handle.id for kind, handle in handles.items()}


def _job_tasks(body: str) -> dict[str, Any]:
    """A job's tasks in Flower, without its watchdog (swarm.watch, waiting for its countdown)."""
    return {k: t for k, t in json.loads(body).items() if t["name"] != "swarm.watch"}


def _all_succeeded(got: tuple[int, str]) -> bool:
    return got[0] == 200 and sum(t["state"] == "SUCCESS" for t in _job_tasks(got[1]).values()) == 5


def _check_flower(flower: str, jobs: dict[str, str]) -> None:
    """Tasks found by job id, succeeded, with safe summaries; workers with their queues;
    401 without auth; the key in no answer."""
    answers = []
    for kind, job_id in jobs.items():
        url = f"{flower}/api/tasks?search={job_id}"
        body = _poll(lambda url=url: _get(url), _all_succeeded)[1]
        answers.append(body)
        tasks = _job_tasks(body)
        assert {t["state"] for t in tasks.values()} == {"SUCCESS"} and len(tasks) == 5, tasks
        assert (
            sorted(t["name"] for t in tasks.values())
            == ["swarm.aggregate"] + ["swarm.subagent"] * 4
        )
        model, service = JOBS[kind]
        for task in tasks.values():
            assert task["args"].startswith(f"job={job_id} ") and task["kwargs"] == "{}"
            if task["name"] == "swarm.subagent":
                assert f"model={model}" in task["args"] and "input_chars=" in task["args"]
                assert task["worker"].startswith(f"{service}-")
        assert PROMPT_MARK not in body
    body = _poll(
        lambda: _get(f"{flower}/api/workers?refresh=1"),
        lambda got: got[0] == 200 and len(json.loads(got[1])) == 4,
    )[1]
    answers.append(body)
    workers = json.loads(body)
    assert sorted(w.split("@")[0] for w in workers) == [
        "worker-aggregate-1", "worker-fast-1", "worker-fast-2", "worker-reason-1",
    ]  # fmt: skip
    for node, info in workers.items():
        service = node.split("@")[0].rsplit("-", 1)[0]
        assert {q["name"] for q in info["active_queues"]} == QUEUES[service]
    answers.append(_get(f"{flower}/api/task/info/{jobs['default']}-n0000")[1])
    assert _get(f"{flower}/api/workers", auth=False)[0] == 401
    assert _get(f"{flower}/api/tasks", auth=False)[0] == 401
    assert not [a for a in answers if KEY in a]


def _check_metrics(started: dict[str, dict[str, Any]]) -> None:
    """Tokens, cost and calls of each model, on the worker service that served it."""
    for model, service in JOBS.values():
        ports = [p["metrics_port"] for name, p in started.items() if name.startswith(f"{service}-")]
        assert len(set(ports)) == len(ports), ports
        texts = [_get(f"http://127.0.0.1:{port}/metrics", auth=False)[1] for port in ports]
        assert sum(_metric(t, "swarm_input_tokens_total", model) for t in texts) > 0
        assert sum(_metric(t, "swarm_output_tokens_total", model) for t in texts) > 0
        assert sum(_metric(t, "swarm_cost_usd_total", model) for t in texts) > 0
        calls = [_metric(t, "swarm_calls_total", model) for t in texts]
        assert sum(calls) >= 4, (model, calls)  # per replica: one endpoint each


def _check_redis(port: int) -> None:
    """The key is in no Redis key or value (broker, results, job store)."""
    for db in (0, 1):
        client = redis.Redis(port=port, password=REDIS_PASSWORD, db=db, decode_responses=True)
        try:
            assert KEY not in _redis_dump(client)
        finally:
            client.close()
