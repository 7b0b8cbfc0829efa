"""End to end through `swarm sim --provider deepseek --usage-format moonshot`, Redis and a
`celery -A workers worker`: the job's ledger (Lua scripts) equals the simulator's /stats,
cached tokens in Moonshot's top-level field included; the thinking model's reasoning is
counted by the simulator and not reported by Moonshot's format.

The catalog sends its deepseek-v3.2 model as deepseek-reasoner (a model that always
thinks and fixes no request field, so the catalog's requests are accepted as they are).
"""

from __future__ import annotations

from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import pytest
from stack import Stack, Worker, running_stack

from swarm.catalog import load_catalog
from swarm.client import SwarmClient
from swarm.cost.pricing import cost_usd
from swarm.records import Usage

pytestmark = pytest.mark.integration

MODEL = "deepseek-v3.2"
THINKING = "deepseek-reasoner"
REASONING = 50
INSTRUCTION = "Review the document against the style guide. " + "Check every rule. " * 300


@pytest.fixture(scope="module")
def profiled(
    redis_server, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Stack, Path]]:  # type: ignore[no-untyped-def]
    logs = tmp_path_factory.mktemp("profile-logs")
    text = resources.files("swarm.data").joinpath("catalog.toml").read_text("utf-8")
    config = logs / "catalog.toml"
    config.write_text(text.replace(f'gateway_name = "{MODEL}"', f'gateway_name = "{THINKING}"'))
    sim_args = ["--provider", "deepseek", "--usage-format", "moonshot"]
    sim_args += ["--reasoning-tokens", str(REASONING)]
    env = {"SWARM_CONFIG": str(config)}
    with running_stack(redis_server, logs, sim_args, [Worker("w1", c=8)], env) as st:
        yield st, config


def test_the_redis_ledger_equals_the_gateways_counts_in_moonshots_format(
    profiled: tuple[Stack, Path],
) -> None:
    st, config = profiled
    client = SwarmClient.from_settings(st.settings(config=config))
    inputs = [f"document {i}: " + "lorem ipsum " * 30 for i in range(8)]
    report = client.submit(inputs, INSTRUCTION, model=MODEL).wait(timeout=120).to_dict()
    assert report["status"] == "succeeded", report.get("error")
    stats = st.stats()
    thinking = stats["models"][THINKING]
    nodes_calls = len(inputs)
    assert thinking["completed"] == nodes_calls and thinking["reasoning_tokens"] == (
        REASONING * nodes_calls
    )
    line = report["models"][MODEL]
    assert line["calls"] == thinking["completed"]
    assert thinking["cached_tokens"] > 0
    for field in ("prompt_tokens", "completion_tokens", "cached_tokens"):
        assert line[field] == thinking[field], field
    assert line["reasoning_tokens"] == 0  # Moonshot's usage does not report them
    usage = Usage(**{f: line[f] for f in ("prompt_tokens", "completion_tokens", "cached_tokens")})
    expected = cost_usd(load_catalog(config).model(MODEL), usage)
    assert line["cost_usd"] == pytest.approx(expected, abs=1e-6)
