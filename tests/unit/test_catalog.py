from __future__ import annotations

from pathlib import Path

import pytest

from swarm.catalog import load_catalog, parse_catalog
from swarm.errors import ConfigError, UnknownModelError

GOOD_MODEL = """
[models.m1]
gateway_name = "m1"
queue = "llm.m1"
input_per_mtok_usd = 1.0
output_per_mtok_usd = 2.0
cached_input_per_mtok_usd = 0.1
rpm = 10
tpm = 1000
max_inflight = 2
context_window = 8000
max_tokens = 256
"""
GOOD_ROUTING = '\n[routing]\ndefault = ["m1"]\naggregate = ["m1"]\n'


def test_packaged_catalog_covers_the_seeds_models() -> None:
    cat = load_catalog()
    assert set(cat.models) >= {
        "kimi-k2.5",
        "gemini-2.5-flash",
        "claude-sonnet-4.5",
        "gpt-4.1",
        "deepseek-v3.2",
    }
    assert cat.route("aggregate").name == "kimi-k2.5"
    assert cat.route("extract").name == "gemini-2.5-flash"
    assert cat.route("code").name == "claude-sonnet-4.5"
    # Seed 001's output prices, USD per million tokens.
    outputs = {name: m.output_per_mtok_usd for name, m in cat.models.items()}
    assert outputs == {
        "kimi-k2.5": 0.60,
        "gemini-2.5-flash": 2.50,
        "claude-sonnet-4.5": 15.00,
        "gpt-4.1": 8.00,
        "deepseek-v3.2": 0.42,
    }
    assert len(cat.queues()) == 5


def test_seed_000_swarm_costs_are_reproduced() -> None:
    from swarm.cost.pricing import cost_usd
    from swarm.records import Usage

    cat = load_catalog()
    usage = Usage(prompt_tokens=412_000, completion_tokens=196_000)
    costs = {name: round(cost_usd(m, usage), 2) for name, m in cat.models.items()}
    assert costs["kimi-k2.5"] == pytest.approx(0.74, abs=0.015)
    assert costs["claude-sonnet-4.5"] == pytest.approx(4.17, abs=0.015)
    assert costs["gpt-4.1"] == pytest.approx(2.81, abs=0.015)
    assert costs["gemini-2.5-flash"] == pytest.approx(0.61, abs=0.015)
    assert costs["deepseek-v3.2"] == pytest.approx(0.19, abs=0.015)


def test_swarm_config_file_replaces_the_catalog(tmp_path: Path) -> None:
    path = tmp_path / "cat.toml"
    path.write_text(GOOD_MODEL + GOOD_ROUTING)
    cat = load_catalog(path)
    assert list(cat.models) == ["m1"] and cat.route("default").queue == "llm.m1"


@pytest.mark.parametrize(
    ("text", "names"),
    [
        (GOOD_MODEL + '\n[routing]\ndefault = ["nope"]\naggregate = ["m1"]\n', "routing.default"),
        (GOOD_MODEL.replace("1.0", "-1.0") + GOOD_ROUTING, "input_per_mtok_usd"),
        (GOOD_MODEL.replace('queue = "llm.m1"\n', "") + GOOD_ROUTING, "queue"),
        (GOOD_MODEL + '\n[routing]\ndefault = ["m1"]\n', "routing.aggregate"),
        (GOOD_MODEL.replace("rpm = 10", "rpm = 0") + GOOD_ROUTING, "rpm"),
        (GOOD_MODEL + GOOD_ROUTING + "\n[extra]\nx = 1\n", "extra"),
        ("not [toml", "not TOML"),
    ],
)
def test_bad_catalog_is_one_line_naming_the_field(text: str, names: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_catalog(text, "cat.toml")
    message = str(err.value)
    assert names in message and "cat.toml" in message and "\n" not in message


def test_missing_catalog_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read model catalog"):
        load_catalog(tmp_path / "missing.toml")


def test_unknown_model_and_kind_name_the_known_ones() -> None:
    cat = load_catalog()
    with pytest.raises(UnknownModelError, match=r"kimi-k2\.5"):
        cat.model("gpt-9")
    with pytest.raises(UnknownModelError, match="extract"):
        cat.route("dance")
