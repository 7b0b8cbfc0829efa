"""The producer API against a real Redis (no worker needed: jobs are only submitted):
SwarmClient() reads the environment and takes keyword overrides, closes every connection
it opened, the module-level helpers share one client, and the gateway is checked at submit
as the CLI checks it."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import procs
import pytest
import redis

import swarm
from swarm import SwarmClient
from swarm.calls import preflight
from swarm.client import close_default, default_client
from swarm.errors import GatewayUnavailableError, MissingKeyError
from swarm.sim import SimConfig, start_in_thread

DEADLINE_S = 30.0


def closed_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"redis://127.0.0.1:{s.getsockname()[1]}/0"


@pytest.fixture
def observer(redis_url: str) -> Iterator[redis.Redis]:
    r = redis.Redis.from_url(redis_url, decode_responses=True)
    yield r
    r.close()


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, redis_url: str) -> str:
    """The producer's environment: the test's Redis, no gateway (the workers have theirs)."""
    for name in ("SWARM_BASE_URL", "SWARM_API_KEY", "OPENAI_API_KEY", "SWARM_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SWARM_BROKER_URL", redis_url)
    return redis_url


def connections(r: redis.Redis) -> set[str]:
    """Ids of the clients connected to the server, this observer's own left out."""
    own = r.client_id()
    return {str(c["id"]) for c in r.client_list() if str(c["id"]) != str(own)}


def opened_since(r: redis.Redis, before: set[str]) -> set[str]:
    """Connections opened since ``before`` that are still open (others of the test
    process, such as an earlier test's pools closing, come and go independently)."""
    return connections(r) - before


def until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_the_environment_and_keyword_overrides(env: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with SwarmClient() as client:
        assert client.settings.broker_url == env and client.settings.base_url is None
    monkeypatch.setenv("SWARM_BROKER_URL", closed_url())  # overridden: never reached
    with SwarmClient(broker_url=env, base_url="http://gw.invalid/v1", check_gateway=False) as c:
        assert c.settings.broker_url == env and c.settings.base_url == "http://gw.invalid/v1"
        assert c.submit(["a"], "Summarise").progress().phase == "nodes"


def test_close_closes_every_connection_the_client_opened(env: str, observer: redis.Redis) -> None:
    before = connections(observer)
    with SwarmClient() as client:
        handle = client.submit(["a", "b"], "Summarise")  # broker, job store, chord state
        assert handle.progress().nodes_total == 2
        opened = opened_since(observer, before)
        assert opened
    until(lambda: not (connections(observer) & opened), "connections left open after close()")
    client.close()  # idempotent


def test_the_module_helpers_share_one_client(env: str, observer: redis.Redis) -> None:
    before = connections(observer)
    try:
        first = swarm.submit(["a"], "Summarise")
        second = swarm.submit(["b", "c"], "Summarise")
        shared = default_client()
        assert swarm.attach(first.id).progress().nodes_total == 1
        assert swarm.attach(second.id).progress().phase == "nodes"
        assert default_client() is shared
        settings = shared.settings.model_copy(update={"min_success_ratio": 1.0})
        third = swarm.submit(["d"], "Summarise", settings=settings)
        own = default_client(settings)
        assert own is not shared and own.store.spec(third.id).min_success_ratio == 1.0
        assert swarm.attach(third.id, settings=settings).progress().nodes_total == 1
        assert default_client(settings) is own
        opened = opened_since(observer, before)
        assert opened
    finally:
        close_default()
    until(lambda: not (connections(observer) & opened), "the shared client's connections stay open")


def test_an_unreachable_gateway_refuses_the_job_before_anything_is_sent(
    env: str, observer: redis.Redis
) -> None:
    dead = closed_url().replace("redis://", "http://").replace("/0", "/v1")
    client = SwarmClient(base_url=dead, api_key="sk-test")
    with client, pytest.raises(GatewayUnavailableError, match="cannot reach the gateway"):
        client.submit(["a"], "Summarise")
    jobs = redis.Redis.from_url(procs.with_db(env, 1))
    assert jobs.dbsize() == 0 and observer.llen("llm.kimi-k2.5") == 0
    jobs.close()
    with SwarmClient(base_url=dead, api_key="sk-test", check_gateway=False) as client:
        assert client.submit(["a"], "Summarise").progress().nodes_total == 1


def test_a_placeholder_key_is_refused_at_submit(env: str) -> None:
    with (
        start_in_thread(SimConfig()) as sim,
        SwarmClient(base_url=sim.base_url, api_key="YOUR_API_KEY") as client,
        pytest.raises(MissingKeyError),
    ):
        client.submit(["a"], "Summarise")


def test_a_gateway_that_answers_is_checked_once(env: str, monkeypatch: pytest.MonkeyPatch) -> None:
    checked: list[str] = []
    real = preflight.check_gateway

    def counted(client: Any, base_url: str, *args: Any, **kwargs: Any) -> None:
        checked.append(base_url)
        real(client, base_url, *args, **kwargs)

    monkeypatch.setattr(preflight, "check_gateway", counted)
    with start_in_thread(SimConfig()) as sim, SwarmClient(base_url=sim.base_url) as client:
        handles = [client.submit(["a"], "Summarise") for _ in range(3)]
    assert checked == [sim.base_url] and len({h.id for h in handles}) == 3
