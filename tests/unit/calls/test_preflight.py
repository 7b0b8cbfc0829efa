"""The start-up check against the simulator: a base URL without /v1, and no key at all."""

from __future__ import annotations

import logging

import pytest

from swarm.calls.gateway import make_client
from swarm.calls.preflight import NO_KEY, check_gateway
from swarm.errors import GatewayUnavailableError, MissingKeyError
from swarm.settings import Settings
from swarm.sim import SimConfig, start_in_thread


def test_a_404_on_models_says_wrong_base_url() -> None:
    with start_in_thread(SimConfig()) as sim:
        client = make_client(Settings(), sim.url, "k")
        with pytest.raises(GatewayUnavailableError, match=r"wrong base URL \(missing /v1\?\)"):
            check_gateway(client, sim.url)


def test_no_key_passes_a_server_without_keys_and_names_the_variable_otherwise() -> None:
    with start_in_thread(SimConfig()) as open_sim:
        check_gateway(
            make_client(Settings(), open_sim.base_url, NO_KEY), open_sim.base_url, keyless=True
        )
    with start_in_thread(SimConfig(api_key="secret")) as keyed:
        client = make_client(Settings(), keyed.base_url, NO_KEY)
        with pytest.raises(MissingKeyError, match="SWARM_API_KEY"):
            check_gateway(client, keyed.base_url, keyless=True)


def test_a_gateway_without_models_passes_when_its_completion_path_exists(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with start_in_thread(SimConfig(no_models=True)) as sim:
        client = make_client(Settings(), sim.base_url, "k")
        with caplog.at_level(logging.DEBUG, logger="swarm.calls.preflight"):
            check_gateway(client, sim.base_url)
        stats = sim.stats()
    assert "the completion path exists" in caplog.text and "answers 400" in caplog.text
    assert (stats["requests"], stats["client_errors"], stats["completed"]) == (1, 1, 0)
    assert stats["prompt_tokens"] == stats["completion_tokens"] == 0


def test_without_models_a_base_url_missing_v1_is_still_refused_with_the_hint() -> None:
    with start_in_thread(SimConfig(no_models=True)) as sim:
        client = make_client(Settings(), sim.url, "k")
        with pytest.raises(GatewayUnavailableError, match=r"wrong base URL \(missing /v1\?\)"):
            check_gateway(client, sim.url)


def test_without_models_a_key_the_completion_path_rejects_is_refused() -> None:
    with start_in_thread(SimConfig(no_models=True, api_key="secret")) as sim:
        wrong = make_client(Settings(), sim.base_url, "not-it")
        rejected = r"rejected the API key in SWARM_API_KEY \(or OPENAI_API_KEY\)"
        with pytest.raises(GatewayUnavailableError, match=rejected):
            check_gateway(wrong, sim.base_url)
        with pytest.raises(MissingKeyError, match="SWARM_API_KEY"):
            check_gateway(make_client(Settings(), sim.base_url, NO_KEY), sim.base_url, keyless=True)
        check_gateway(make_client(Settings(), sim.base_url, "secret"), sim.base_url)
