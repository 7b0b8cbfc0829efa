"""Checks of docker-compose.yml, .env.example and ops/Dockerfile as files (no Docker here):
the compose file parses, every command resolves to a real entry point, every variable is
documented, and workers can be scaled."""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path
from typing import Any

import click
import pytest
import yaml
from celery.app.utils import find_app
from dotenv import dotenv_values

from swarm.catalog import load_catalog
from swarm.cli.main import main as swarm_cli
from swarm.stack.compose import ComposeFile, load_compose, parse_duration_s

ROOT = Path(__file__).resolve().parents[3]
COMPOSE = ROOT / "docker-compose.yml"
ENV_EXAMPLE = ROOT / ".env.example"
WORKERS = {
    "worker-fast": {"llm.gemini-2.5-flash", "llm.deepseek-v3.2"},
    "worker-reason": {"llm.claude-sonnet-4.5", "llm.gpt-4.1"},
    "worker-aggregate": {"llm.kimi-k2.5"},
}
FILLED = {"REDIS_PASSWORD": "pw", "FLOWER_PASSWORD": "fpw"}


@pytest.fixture(scope="module")
def compose() -> ComposeFile:
    return load_compose(COMPOSE, FILLED)


def _flag(argv: tuple[str, ...], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_it_parses_with_the_expected_services(compose: ComposeFile) -> None:
    assert isinstance(yaml.safe_load(COMPOSE.read_text()), dict)
    assert set(compose.services) == {"redis", "flower", "sim", *WORKERS}
    assert compose.services["sim"].profiles == ("sim",)
    assert all(not compose.services[name].profiles for name in ("redis", "flower", *WORKERS))


def test_workers_serve_catalog_queues_and_every_queue_has_a_worker(compose: ComposeFile) -> None:
    catalog_queues = set(load_catalog().queues())
    served: set[str] = set()
    for name, queues in WORKERS.items():
        argv = compose.services[name].command
        assert argv[:4] == ("celery", "-A", "workers", "worker")
        named = set(_flag(argv, "-Q").split(","))
        assert named == queues and named <= catalog_queues
        served |= named
    assert served == catalog_queues


def test_worker_app_imports_and_registers_the_swarm_tasks() -> None:
    app = find_app("workers")  # what `celery -A workers` does
    assert {"swarm.subagent", "swarm.aggregate"} <= set(app.tasks)


def test_other_commands_resolve_to_real_entry_points(compose: ComposeFile) -> None:
    flower = compose.services["flower"].command
    assert flower[:2] == ("celery", "flower")
    commands = importlib.metadata.entry_points(group="celery.commands")
    assert "flower" in {ep.name for ep in commands}
    sim = compose.services["sim"].command
    assert sim[:2] == ("swarm", "sim")
    sim_cmd = swarm_cli.get_command(click.Context(swarm_cli), "sim")
    assert sim_cmd is not None
    sim_cmd.make_context("sim", list(sim[2:]))  # every option it is given exists and parses
    assert compose.services["redis"].command[0] == "redis-server"


def test_every_variable_is_in_env_example_and_nothing_else(compose: ComposeFile) -> None:
    documented = set(dotenv_values(ENV_EXAMPLE))
    assert compose.variables == documented


def test_workers_can_be_scaled_and_stop_gracefully(compose: ComposeFile) -> None:
    for name in WORKERS:
        service = compose.services[name]
        assert not {"container_name", "hostname", "ports"} & set(service.raw)
        assert "-E" in service.command  # Flower needs task events
        assert _flag(service.command, "-P") == "threads"
        assert _flag(service.command, "-n").endswith("@%h")  # unique per container
        # SIGTERM stays Celery's warm shutdown (threads cannot be cancelled, celery#10490),
        # and the grace period lets a running call reach its own timeout first.
        assert service.stop_signal == "SIGTERM" and "REMAP_SIGTERM" not in service.environment
        assert service.stop_grace_s > float(service.environment["SWARM_NODE_TIMEOUT_S"])


def test_secrets_come_from_the_environment(compose: ComposeFile) -> None:
    redis = compose.services["redis"]
    assert _flag(redis.command, "--requirepass") == "pw"
    assert _flag(redis.command, "--appendonly") == "yes"
    flower = compose.services["flower"]
    assert flower.environment["FLOWER_BASIC_AUTH"] == "admin:fpw"
    options = dict(a.removeprefix("--").split("=", 1) for a in flower.command[2:])
    assert int(options["max_tasks"]) > 0 and int(options["purge_offline_workers"]) > 0
    env_values: dict[str, Any] = dotenv_values(ENV_EXAMPLE)
    assert not env_values["REDIS_PASSWORD"] and not env_values["FLOWER_PASSWORD"]
    assert not env_values["SWARM_STACK_API_KEY"]


def test_a_producers_shell_does_not_leak_into_the_containers() -> None:
    """Compose variables never share a name with what the containers read: a producer's
    `export SWARM_BASE_URL=http://127.0.0.1:8900/v1` would point every worker at itself."""
    shell = {"SWARM_BASE_URL": "http://127.0.0.1:1/v1", "SWARM_API_KEY": "producer-key"}
    compose = load_compose(COMPOSE, {**FILLED, **shell})
    inside = {key for service in compose.services.values() for key in service.environment}
    assert not compose.variables & inside
    for name in WORKERS:
        env = compose.services[name].environment
        assert env["SWARM_BASE_URL"] == "http://sim:8900/v1"
        assert env["SWARM_API_KEY"] == "sim"  # the simulator's; `swarm run` inside passes
    stack = load_compose(COMPOSE, {**FILLED, "SWARM_STACK_API_KEY": "sk-real"})
    assert stack.services["worker-fast"].environment["SWARM_API_KEY"] == "sk-real"


def test_what_is_published_is_on_the_hosts_loopback_only(compose: ComposeFile) -> None:
    published = {name: s.raw.get("ports", []) for name, s in compose.services.items()}
    assert {name for name, ports in published.items() if ports} == {"redis", "flower", "sim"}
    assert all(p.startswith("127.0.0.1:") for ports in published.values() for p in ports)


def test_a_missing_password_is_refused() -> None:
    with pytest.raises(Exception, match="REDIS_PASSWORD"):
        load_compose(COMPOSE, {"FLOWER_PASSWORD": "x"})


def test_dockerfile_is_slim_non_root_healthchecked_and_secret_free() -> None:
    text = (ROOT / "ops" / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.\d+-slim", text, re.M)
    users = re.findall(r"^USER (\S+)", text, re.M)
    assert users and users[-1] not in {"root", "0"}
    assert re.search(r"^HEALTHCHECK .*\n?.*workers\.health", text, re.M)
    assert re.search(r"pip [^\n]*install [^\n]*'\.\[ops\]'", text)
    assert re.search(r'^ENTRYPOINT \["/usr/bin/tini", "--"\]', text, re.M)  # not celery as PID 1
    env_lines = re.findall(r"^ENV .*(?:\n\s+.*)*", text, re.M)
    assert not re.search(r"KEY|PASSWORD|SECRET|TOKEN", "\n".join(env_lines))


def test_the_image_installs_the_locked_dependencies_with_hashes() -> None:
    text = (ROOT / "ops" / "Dockerfile").read_text()
    assert len(re.findall(r"^FROM ", text, re.M)) == 2  # build stage, then runtime
    assert re.search(r"install --require-hashes --no-deps -r ops/requirements\.lock", text)
    lock = (ROOT / "ops" / "requirements.lock").read_text()
    pins = re.findall(r"^([a-z0-9][a-z0-9._-]*)==\S+ \\$", lock, re.M)
    assert {"celery", "kombu", "redis", "hiredis", "openai", "pydantic", "flower"} <= set(pins)
    requirements = [line for line in lock.splitlines() if line and line[0].isalnum()]
    assert len(requirements) == len(pins)  # every requirement is pinned


def test_compose_durations() -> None:
    assert parse_duration_s("60s") == 60
    assert parse_duration_s("1m30s") == 90
    assert parse_duration_s("500ms") == 0.5
    assert parse_duration_s(None) == 10
    with pytest.raises(Exception, match="duration"):
        parse_duration_s("soon")


def test_workers_run_without_glibcs_per_thread_malloc_cache() -> None:
    """Every worker gets GLIBC_TUNABLES with tcache_count=0 (its RSS does not grow with the
    job); SWARM_STACK_GLIBC_TUNABLES replaces it."""
    for env, expected in (
        ({}, "glibc.malloc.tcache_count=0"),
        (
            {"SWARM_STACK_GLIBC_TUNABLES": "glibc.malloc.tcache_count=7"},
            "glibc.malloc.tcache_count=7",
        ),
        ({"GLIBC_TUNABLES": "glibc.pthread.rseq=0"}, "glibc.malloc.tcache_count=0"),  # not read
    ):
        compose = load_compose(COMPOSE, {**FILLED, **env})
        for name in WORKERS:
            assert compose.services[name].environment["GLIBC_TUNABLES"] == expected
    assert dotenv_values(ENV_EXAMPLE)["SWARM_STACK_GLIBC_TUNABLES"] == "glibc.malloc.tcache_count=0"
