"""The start-up check against the simulator: a base URL without /v1, and no key at all."""

from __future__ import annotations

import pytest

from swarm.calls.gateway import make_client
from swarm.cli.preflight import NO_KEY, check_gateway
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
