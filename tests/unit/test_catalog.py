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
        (GOOD_MODEL + '\n[routing]\ndefault = ["nope"]\naggregate = ["m1"]\n', "'nope'"),
        (GOOD_MODEL.replace("1.0", "-1.0") + GOOD_ROUTING, "input_per_mtok_usd"),
        (GOOD_MODEL.replace('queue = "llm.m1"\n', "") + GOOD_ROUTING, "queue"),
        (GOOD_MODEL + '\n[routing]\ndefault = ["m1"]\n', "aggregate in [routing]"),
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


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (
            GOOD_MODEL.replace("rpm = 10", 'rpm = "4800"') + GOOD_ROUTING,
            "rpm in [models.m1]: Input should be a valid integer, not the string '4800'",
        ),
        (
            GOOD_MODEL.replace("rpm = 10", "rpm = 10.0") + GOOD_ROUTING,
            "rpm in [models.m1]: Input should be a valid integer, not the float 10.0",
        ),
        (
            GOOD_MODEL.replace("input_per_mtok_usd = 1.0", 'input_per_mtok_usd = "1.0"')
            + GOOD_ROUTING,
            "input_per_mtok_usd in [models.m1]: Input should be a valid number, "
            "not the string '1.0'",
        ),
        (
            GOOD_MODEL.replace("max_inflight", "max_inflght") + GOOD_ROUTING,
            "unknown field max_inflght in [models.m1] (did you mean max_inflight?)",
        ),
        (
            GOOD_MODEL.replace("[models.m1]", '[models."m-1.5"]').replace('"m1"', '"m-1.5"')
            + GOOD_ROUTING.replace("m1", "m-1.5")
            + "\n[backends.default]\nmax_inflite = 3\n",
            "unknown field max_inflite in [backends.default] (did you mean max_inflight?)",
        ),
        (
            GOOD_MODEL.replace("[models.m1]", '[models."m-1.5"]').replace("rpm = 10", "rpm = -1")
            + GOOD_ROUTING.replace("m1", "m-1.5"),
            'rpm in [models."m-1.5"]: Input should be greater than 0, not the integer -1',
        ),
        (
            "rooting = 1\n" + GOOD_MODEL + GOOD_ROUTING,
            "unknown field rooting at the top level (did you mean routing?)",
        ),
        (
            GOOD_MODEL + GOOD_ROUTING + 'sumarize = ["m1"]\n',
            "unknown routing kind sumarize in [routing] (did you mean summarize?)",
        ),
        (
            GOOD_MODEL + GOOD_ROUTING + 'translate = ["m1"]\n',
            "unknown routing kind translate in [routing] "
            "(declare a kind of your own in kinds = [...])",
        ),
        (
            GOOD_MODEL + GOOD_ROUTING + 'extract = "m1"\n',
            "extract in [routing]: Input should be an array of names, not the string 'm1'",
        ),
        (
            'kinds = "translate"\n' + GOOD_MODEL + GOOD_ROUTING,
            "kinds at the top level: Input should be an array of names, not the string 'translate'",
        ),
        (
            GOOD_MODEL.replace("max_tokens = 256\n", "") + GOOD_ROUTING,
            "missing field max_tokens in [models.m1]",
        ),
        (
            GOOD_MODEL + GOOD_ROUTING + "extract = [1]\n",
            "extract in [routing]: Input should be a valid string, not the integer 1",
        ),
        (
            GOOD_MODEL.replace('queue = "llm.m1"', 'queue = "llm.m1"\nbackend = "gpu"')
            + GOOD_ROUTING,
            "backend in [models.m1]: unknown backend 'gpu'",
        ),
        (
            GOOD_MODEL + GOOD_ROUTING + '[tenants]\nteam-a = "3"\n',
            "team-a in [tenants]: Input should be a valid number, not the string '3'",
        ),
        (
            GOOD_MODEL + GOOD_ROUTING + "[tenants]\nteam-a = 0\n",
            "team-a in [tenants]: Input should be greater than 0, not the integer 0",
        ),
        (
            GOOD_MODEL + GOOD_ROUTING + '[tenants]\n"team a" = 2\n',
            "invalid key 'team a' in [tenants]: String should match pattern "
            "'^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$'",
        ),
        (
            "[tenant]\nteam-a = 2\n" + GOOD_MODEL + GOOD_ROUTING,
            "unknown table [tenant] at the top level (did you mean tenants?)",
        ),
    ],
)
def test_catalog_error_is_one_line_naming_field_and_table(text: str, line: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_catalog(text, "cat.toml")
    assert str(err.value) == f"invalid model catalog cat.toml: {line}"


def test_declared_kinds_route_and_may_be_planned() -> None:
    from swarm.jobs.plan_schema import plannable_kinds

    cat = parse_catalog(
        'kinds = ["translate"]\n' + GOOD_MODEL + GOOD_ROUTING + 'translate = ["m1"]'
    )
    assert cat.route("translate").name == "m1"
    assert "translate" in plannable_kinds(cat)


def test_the_kinds_the_code_routes_are_known() -> None:
    from swarm.catalog import AGGREGATE_KIND, DEFAULT_KIND, KNOWN_KINDS
    from swarm.client import PLAN_KIND
    from swarm.jobs.review import REVIEW_KIND
    from swarm.jobs.subagent import SUMMARIZE_KIND

    used = {DEFAULT_KIND, AGGREGATE_KIND, PLAN_KIND, REVIEW_KIND, SUMMARIZE_KIND}
    assert used <= KNOWN_KINDS
    assert set(load_catalog().routing) <= KNOWN_KINDS


def test_numbers_written_as_integers_are_prices() -> None:
    cat = parse_catalog(
        GOOD_MODEL.replace("output_per_mtok_usd = 2.0", "output_per_mtok_usd = 2") + GOOD_ROUTING
    )
    assert cat.model("m1").output_per_mtok_usd == 2.0


def test_tenants_weigh_as_listed_and_others_one() -> None:
    cat = parse_catalog(GOOD_MODEL + GOOD_ROUTING + "[tenants]\nteam-a = 3\nteam-b = 0.5\n")
    assert (cat.tenant_weight("team-a"), cat.tenant_weight("team-b")) == (3.0, 0.5)
    assert cat.tenant_weight("default") == 1.0 and load_catalog().tenants == {}
