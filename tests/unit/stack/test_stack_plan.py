"""Compose interpolation and the local plan built from the real docker-compose.yml."""

from __future__ import annotations

from pathlib import Path

import pytest

from swarm.errors import ConfigError
from swarm.stack.compose import interpolate, load_compose, load_env, variables_in
from swarm.stack.plan import LocalProcess, plan
from swarm.stack.runner import process_env

ROOT = Path(__file__).resolve().parents[3]
ENV = {"REDIS_PASSWORD": "pw", "FLOWER_PASSWORD": "fpw", "SWARM_API_KEY": "k"}


def test_interpolation_forms() -> None:
    env = {"A": "a", "EMPTY": ""}
    assert interpolate("${A}-${NOPE}-$$A", env) == "a--$A"
    assert interpolate("${EMPTY:-d} ${EMPTY-d} ${NOPE-d}", env) == "d  d"
    with pytest.raises(ConfigError, match="NOPE: say so"):
        interpolate("${NOPE:?say so}", env)
    assert variables_in("x ${A} $${B} ${C:-1}") == {"A", "C"}


def test_shell_wins_over_env_file(tmp_path: Path) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text("A=file\nB=file\n")
    assert load_env(env_file, {"A": "shell"}) == {"A": "shell", "B": "file"}
    assert load_env(tmp_path / "missing.env", {"A": "shell"}) == {"A": "shell"}


def _plan(tmp_path: Path, **kwargs: object) -> dict[str, LocalProcess]:
    compose = load_compose(ROOT / "docker-compose.yml", ENV)
    return {p.name: p for p in plan(compose, tmp_path, **kwargs)}  # type: ignore[arg-type]


def test_local_plan_rewrites_addresses_and_ports(tmp_path: Path) -> None:
    procs = _plan(tmp_path, profiles=["sim"], replicas={"worker-fast": 2}, ports={"flower": 5599})
    assert set(procs) == {
        "redis-1", "sim-1", "flower-1", "worker-fast-1", "worker-fast-2",
        "worker-reason-1", "worker-aggregate-1",
    }  # fmt: skip
    redis, sim, flower = procs["redis-1"], procs["sim-1"], procs["flower-1"]
    assert redis.wave == sim.wave == 0  # no depends_on
    assert all(p.wave == 1 for n, p in procs.items() if n not in {"redis-1", "sim-1"})
    assert redis.argv[redis.argv.index("--port") + 1] == str(redis.port)
    assert redis.argv[-4:-2] == ("--bind", "127.0.0.1")
    assert flower.port == 5599 and "--port=5599" in flower.argv
    assert "--address=127.0.0.1" in flower.argv
    assert flower.env["CELERY_BROKER_URL"] == f"redis://:pw@127.0.0.1:{redis.port}/0"
    assert sim.argv[sim.argv.index("--host") + 1] == "127.0.0.1"
    fast1, fast2 = procs["worker-fast-1"], procs["worker-fast-2"]
    assert fast1.env["SWARM_BASE_URL"] == f"http://127.0.0.1:{sim.port}/v1"
    assert fast1.env["SWARM_BROKER_URL"] == f"redis://:pw@127.0.0.1:{redis.port}/0"
    assert "worker-fast-2@%h" in fast2.argv and fast1.ready == "celery"
    assert fast1.metrics_port and fast2.metrics_port and fast1.metrics_port != fast2.metrics_port
    assert fast2.env["SWARM_METRICS_PORT"] == str(fast2.metrics_port)
    assert fast1.stop_grace_s == 60 and redis.stop_grace_s == 30


def test_a_url_to_a_service_that_does_not_start_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"'sim'.*--with-sim"):
        _plan(tmp_path)  # SWARM_BASE_URL defaults to http://sim:8900/v1


def test_unknown_service_names_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no service 'worker-x'"):
        _plan(tmp_path, profiles=["sim"], replicas={"worker-x": 2})


def test_local_workers_get_the_tcache_tunable_beside_the_shells_own(tmp_path: Path) -> None:
    """`swarm stack` gives each worker the compose file's GLIBC_TUNABLES; tunables the
    shell exports are kept and win over the compose file's one by one."""
    worker = _plan(tmp_path, profiles=["sim"])["worker-fast-1"]
    shell = {"PATH": "/bin"}
    assert process_env(worker.env, shell)["GLIBC_TUNABLES"] == "glibc.malloc.tcache_count=0"
    assert process_env(worker.env, shell)["PATH"] == "/bin"
    rseq = {**shell, "GLIBC_TUNABLES": "glibc.pthread.rseq=0"}
    assert process_env(worker.env, rseq)["GLIBC_TUNABLES"] == (
        "glibc.malloc.tcache_count=0:glibc.pthread.rseq=0"
    )
    cached = {"GLIBC_TUNABLES": "glibc.malloc.tcache_count=7:glibc.malloc.arena_max=4"}
    assert process_env(worker.env, cached)["GLIBC_TUNABLES"] == cached["GLIBC_TUNABLES"]
    assert process_env({}, rseq)["GLIBC_TUNABLES"] == "glibc.pthread.rseq=0"  # not a worker's
