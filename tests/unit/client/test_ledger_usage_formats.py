"""End to end in one process: a job's ledger (the report's usage and models, cached and
reasoning tokens included) equals the simulator's own /stats counts whatever usage format
the gateway writes, and is priced at the catalog's cached price; the packaged catalog's
job runs on each provider profile.

For the ledger, the simulator plays DeepSeek's request rules with deepseek-reasoner (a
model that always thinks and fixes no field, so the packaged catalog's requests are
accepted as they are) and writes its usage in each provider's format (``usage_format``).
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

import pytest

import swarm.testing
from swarm.catalog import load_catalog
from swarm.cost.pricing import cost_usd
from swarm.records import Usage
from swarm.sim import SimConfig, start_in_thread
from swarm.sim.profiles import PROVIDERS
from swarm.sim.usage import USAGE_FORMATS

MODEL = "deepseek-v3.2"
THINKING = "deepseek-reasoner"
"""The gateway name the catalog's MODEL is sent as in this test."""
INSTRUCTION = "Review the document against the style guide. " + "Check every rule. " * 300
"""Long enough (> 1024 estimated tokens) for the simulator's prompt cache."""
REPORTS_REASONING = {"openai", "deepseek"}
"""The formats that report reasoning tokens (Moonshot's and Anthropic's do not)."""


@pytest.fixture(scope="module")
def catalog_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    text = resources.files("swarm.data").joinpath("catalog.toml").read_text("utf-8")
    text = text.replace(f'gateway_name = "{MODEL}"', f'gateway_name = "{THINKING}"')
    path = tmp_path_factory.mktemp("catalog") / "catalog.toml"
    path.write_text(re.sub(r"(?m)^aggregate = .*$", f'aggregate = ["{MODEL}"]', text))
    return path


@pytest.mark.parametrize("usage_format", USAGE_FORMATS)
def test_the_ledger_equals_the_gateways_counts_in_every_usage_format(
    usage_format: str, catalog_path: Path
) -> None:
    catalog = load_catalog(catalog_path)
    config = SimConfig(provider="deepseek", usage_format=usage_format)  # type: ignore[arg-type]
    inputs = [f"document {i}: " + "lorem ipsum " * 30 for i in range(6)]
    with (
        start_in_thread(config) as sim,
        swarm.testing.embedded(base_url=sim.base_url, api_key="k", catalog=catalog) as client,
    ):
        report = client.submit(inputs, INSTRUCTION, model=MODEL).wait(timeout=60).to_dict()
        stats = sim.stats()
    assert report["status"] == "succeeded", report.get("error")
    reported = stats["reasoning_tokens"] if usage_format in REPORTS_REASONING else 0
    expected = Usage(
        prompt_tokens=stats["prompt_tokens"],
        completion_tokens=stats["completion_tokens"],
        cached_tokens=stats["cached_tokens"],
        reasoning_tokens=reported,
    )
    assert stats["cached_tokens"] > 0 and stats["reasoning_tokens"] > 0
    assert sum(line["calls"] for line in report["models"].values()) == stats["completed"]
    assert Usage(**report["usage"]) == expected
    line = report["models"][MODEL]
    assert line["reasoning_tokens"] == reported and line["cached_tokens"] == expected.cached_tokens
    assert set(stats["models"]) == {THINKING} and set(report["models"]) == {MODEL}
    assert report["cost_usd"] == pytest.approx(cost_usd(catalog.model(MODEL), expected), abs=1e-6)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_packaged_catalogs_job_runs_on_each_provider_profile(provider: str) -> None:
    config = SimConfig(provider=provider)  # type: ignore[arg-type]
    with start_in_thread(config) as sim, swarm.testing.embedded(base_url=sim.base_url) as client:
        report = client.submit(["a = 1", "b = 2"], "Review this code").wait(timeout=60)
        stats = sim.stats()
    assert report.status == "succeeded", (report.error, report.nodes[0].error)
    assert stats["client_errors"] == 0
    assert report.usage.completion_tokens == stats["completion_tokens"]
