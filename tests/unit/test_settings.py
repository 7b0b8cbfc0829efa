from __future__ import annotations

import pytest

from swarm.errors import ConfigError, MissingKeyError
from swarm.settings import Settings, load_settings


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "SWARM_BROKER_URL",
        "SWARM_RESULT_URL",
        "SWARM_BASE_URL",
        "SWARM_API_KEY",
        "OPENAI_API_KEY",
        "SWARM_CONFIG",
        "SWARM_NODE_TIMEOUT_S",
    ):
        monkeypatch.delenv(name, raising=False)


def test_defaults_are_embedded_with_no_gateway() -> None:
    s = load_settings()
    assert s.embedded and s.base_url is None and s.usable_key() is None
    assert s.node_timeout_s == 45.0 and s.min_success_ratio == 0.5


def test_environment_is_read_with_the_contract_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWARM_BROKER_URL", "redis://h:6379/0")
    monkeypatch.setenv("SWARM_BASE_URL", "http://gw/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-123")
    s = load_settings()
    assert not s.embedded
    assert s.backend_url() == "redis://h:6379/1"
    assert s.require_key() == "sk-test-123"


def test_swarm_api_key_wins_over_openai_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWARM_API_KEY", "swarm-key")
    monkeypatch.setenv("OPENAI_API_KEY", "openai-key")
    assert load_settings().usable_key() == "swarm-key"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("redis://h:6379/0", "redis://h:6379/1"),
        ("redis://h:6379", "redis://h:6379/1"),
        ("redis://:pw@h:6379/3", "redis://:pw@h:6379/4"),
        ("rediss://h/2?ssl_cert_reqs=none", "rediss://h/3?ssl_cert_reqs=none"),
    ],
)
def test_result_backend_defaults_to_the_next_db(url: str, expected: str) -> None:
    assert Settings(broker_url=url).backend_url() == expected


def test_explicit_result_url_is_kept() -> None:
    s = Settings(broker_url="redis://a/0", result_url="redis://b/5")
    assert s.backend_url() == "redis://b/5"


@pytest.mark.parametrize("key", ["", "   ", "YOUR_HOLYSHEEP_API_KEY", "YOUR_API_KEY", "<key>"])
def test_placeholder_keys_count_as_missing(key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWARM_API_KEY", key)
    s = load_settings()
    assert s.usable_key() is None
    with pytest.raises(MissingKeyError, match="SWARM_API_KEY"):
        s.require_key()


def test_bad_value_is_one_line_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWARM_NODE_TIMEOUT_S", "-1")
    with pytest.raises(ConfigError) as err:
        load_settings()
    assert "SWARM_NODE_TIMEOUT_S" in str(err.value) and "\n" not in str(err.value)


def test_visibility_timeout_must_exceed_the_longest_task() -> None:
    with pytest.raises(ConfigError, match="visibility_timeout_s"):
        load_settings(visibility_timeout_s=100, node_timeout_s=45, max_attempts=5)


def test_settings_are_immutable() -> None:
    s = Settings()
    with pytest.raises(Exception, match="frozen"):
        s.node_timeout_s = 1  # type: ignore[misc]


@pytest.mark.parametrize(
    ("variable", "value", "said"),
    [
        ("SWARM_BROKER_URL", "notaurl", "not a URL (no scheme://); use redis://, rediss://"),
        ("SWARM_RESULT_URL", "amqp://h//", "the scheme amqp:// is not accepted; use redis://"),
        ("SWARM_BASE_URL", "ftp://x", "the scheme ftp:// is not accepted; use http:// or https://"),
    ],
)
def test_a_url_with_another_scheme_is_one_line_naming_the_variable_and_the_schemes(
    variable: str, value: str, said: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError) as err:
        load_settings()
    assert str(err.value).startswith(f"invalid setting {variable}: {said}")
    assert "\n" not in str(err.value)


def test_a_url_keeps_its_password_out_of_the_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWARM_BROKER_URL", "http://user:s3cret@h:6379/0")
    with pytest.raises(ConfigError) as err:
        load_settings()
    assert "s3cret" not in str(err.value) and "http://" in str(err.value)


@pytest.mark.parametrize("url", ["redis://h/0", "rediss://h/0", "unix:///s", "amqp://h//"])
def test_the_brokers_of_the_docs_are_accepted(url: str) -> None:
    assert Settings(broker_url=url).broker_url == url


@pytest.mark.parametrize("key", ["", "  ", "changeme", "YOUR_API_KEY"])
def test_an_empty_key_is_the_same_mistake_as_a_placeholder(
    key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SWARM_API_KEY", key)
    with pytest.raises(MissingKeyError) as err:
        load_settings().gateway_key()
    assert str(err.value).startswith("SWARM_API_KEY (or OPENAI_API_KEY) is set but empty or a")


def test_no_key_variable_at_all_is_no_key_and_a_real_one_is_sent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert load_settings().gateway_key() is None
    monkeypatch.setenv("SWARM_API_KEY", "sk-real")
    assert load_settings().gateway_key() == "sk-real"


def test_a_settings_slice_reads_each_field_from_the_setting_it_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from swarm.calls.admission.limits import LEASE_MARGIN_S, AdmissionPolicy
    from swarm.calls.backend_health import HealthPolicy
    from swarm.calls.hedging.policy import HedgePolicy
    from swarm.jobs.agent import AgentLimits
    from swarm.tools.runner import ToolLimits

    monkeypatch.setenv("SWARM_BACKEND_HOLD_S", "30")
    monkeypatch.setenv("SWARM_HEDGE_QUANTILE", "0.9")
    monkeypatch.setenv("SWARM_AGENT_MAX_STEPS", "3")
    monkeypatch.setenv("SWARM_ADMISSION_WINDOW_SLACK_S", "0.25")
    settings = load_settings()
    assert HealthPolicy.from_settings(settings) == HealthPolicy(hold_s=30.0)
    assert HedgePolicy.from_settings(settings) == HedgePolicy(quantile=0.9)
    tools = ToolLimits.from_settings(settings)
    assert AgentLimits.from_settings(settings, tools=tools) == AgentLimits(tools, max_steps=3)
    policy = AdmissionPolicy.from_settings(settings)
    assert policy.window_slack_s == 0.25 and policy.max_wait_s == 2.0
    assert policy.lease_s == settings.node_timeout_s + LEASE_MARGIN_S  # given, no setting names it
    assert AdmissionPolicy.from_settings(settings, renewed=True).lease_s == settings.lease_s


def test_a_settings_slice_defaults_to_the_settings_defaults() -> None:
    from swarm.calls.admission.limits import AdmissionPolicy
    from swarm.calls.backend_health import HealthPolicy

    defaults = Settings()
    assert HealthPolicy().outage_window_s == defaults.outage_window_s
    assert AdmissionPolicy().window_slack_s == defaults.admission_window_slack_s
