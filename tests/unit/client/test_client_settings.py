"""SwarmClient's settings: the environment, keyword overrides over it, and one clear line
when there is no broker to submit to."""

from __future__ import annotations

import pytest

from swarm import SwarmClient
from swarm.client.setup import with_overrides
from swarm.errors import BrokerUnavailableError, ConfigError
from swarm.settings import Settings


def test_without_a_broker_the_client_says_where_jobs_can_run() -> None:
    with pytest.raises(BrokerUnavailableError, match=r"SWARM_BROKER_URL.*swarm\.testing"):
        SwarmClient()


def test_keywords_override_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWARM_BROKER_URL", "redis://env:6379/0")
    monkeypatch.setenv("SWARM_API_KEY", "sk-env")
    monkeypatch.setenv("SWARM_NODE_TIMEOUT_S", "12")
    settings = with_overrides(None, {"base_url": "http://gw/v1", "api_key": "sk-mine"})
    assert settings.broker_url == "redis://env:6379/0" and settings.base_url == "http://gw/v1"
    assert settings.usable_key() == "sk-mine" and settings.node_timeout_s == 12


def test_keywords_override_given_settings_and_are_validated() -> None:
    given = Settings(broker_url="redis://a:6379/0", api_key="sk-given", node_timeout_s=7)
    assert with_overrides(given, {}) is given
    moved = with_overrides(given, {"broker_url": "redis://b:6379/0"})
    assert moved.broker_url == "redis://b:6379/0" and moved.backend_url() == "redis://b:6379/1"
    assert moved.usable_key() == "sk-given" and moved.node_timeout_s == 7
    with pytest.raises(ConfigError, match="SWARM_CONFIG"):
        with_overrides(given, {"config": ["not", "a", "path"]})
