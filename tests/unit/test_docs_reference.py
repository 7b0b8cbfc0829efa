"""The docs' generated reference (docs/hooks/reference.py): it covers every setting, catalog
field and public name, and refuses code that lacks what a page needs."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
from pydantic import BaseModel

import swarm
from swarm.backends import BackendSpec
from swarm.catalog import ModelSpec
from swarm.settings import Settings

HOOK = Path(__file__).resolve().parents[2] / "docs" / "hooks" / "reference.py"


@pytest.fixture(scope="module")
def hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_reference_hook", HOOK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_setting_has_a_row(hook: ModuleType) -> None:
    table = hook.settings_table()
    for name in Settings.model_fields:
        if name == "api_key":
            assert "`SWARM_API_KEY` or `OPENAI_API_KEY`" in table
        else:
            assert f"`SWARM_{name.upper()}`" in table


def test_every_catalog_field_a_user_writes_has_a_row(hook: ModuleType) -> None:
    models, backends = hook.catalog_models_table(), hook.catalog_backends_table()
    for spec, table in ((ModelSpec, models), (BackendSpec, backends)):
        for name in spec.model_fields:
            assert (f"| `{name}` |" in table) == (name not in hook.CATALOG_SKIP)


def test_a_row_shows_type_default_bounds_and_docstring(hook: ModuleType) -> None:
    rows = {line.split(" | ")[0]: line for line in hook.settings_table().splitlines()}
    row = rows["| `SWARM_MIN_SUCCESS_RATIO`"]
    assert "float (>= 0, <= 1)" in row
    assert "`0.5`" in row
    assert "Share of nodes that must succeed" in row
    limit_window = next(
        line for line in hook.catalog_models_table().splitlines() if "`limit_window`" in line
    )
    assert '"bucket" \\| "sliding" \\| "fixed"' in limit_window


def test_a_field_without_a_docstring_fails_the_build(hook: ModuleType) -> None:
    class Undocumented(BaseModel):
        documented: int = 1
        """Has one."""
        bare: int = 2

    with pytest.raises(hook.DocsError, match="bare"):
        hook.field_docs(Undocumented)


def test_the_api_page_documents_every_public_name(hook: ModuleType) -> None:
    blocks = hook.api_blocks()
    for name in swarm.__all__:
        assert any(line.endswith(f".{name}") for line in blocks.splitlines() if "::: " in line)


def test_markers_expand_and_an_unknown_one_fails(hook: ModuleType) -> None:
    page = hook.on_page_markdown("intro\n<!-- swarm:catalog-backends -->\nend\n")
    assert "| `base_url` |" in page and "<!-- swarm:" not in page
    with pytest.raises(hook.DocsError, match="unknown marker"):
        hook.on_page_markdown("<!-- swarm:nothing-like-it -->\n")


def test_the_reference_shows_the_blocking_client_first(hook: ModuleType) -> None:
    blocks = [line for line in hook.api_blocks().splitlines() if line.startswith(":::")]
    names = [block.split()[1].rsplit(".", 1)[1] for block in blocks]
    assert names[:6] == [
        "SwarmClient", "SwarmHandle", "submit", "attach", "AsyncSwarmClient", "AsyncSwarmHandle"
    ]  # fmt: skip


def test_the_async_client_takes_the_clients_arguments_by_name() -> None:
    import inspect

    from swarm.client import AsyncSwarmClient, SwarmClient

    sync = list(inspect.signature(SwarmClient).parameters.values())
    wrapped = list(inspect.signature(AsyncSwarmClient).parameters.values())
    assert wrapped[:-1] == sync and wrapped[-1].name == "client"


def test_the_async_wrappers_refer_to_the_client_by_links_and_hide_their_wiring(
    hook: ModuleType,
) -> None:
    import re

    import swarm.client.aio

    source = Path(swarm.client.aio.__file__).read_text("utf-8")
    assert re.findall(r"See (Swarm\w+\.\w+)", source) == []  # each is [name][identifier]
    assert len(re.findall(r"See \[Swarm\w+\.\w+\]\[swarm\.client\.Swarm\w+\.\w+\]", source)) >= 6
    async_block = next(b for b in hook.api_blocks().split("\n\n") if "AsyncSwarmClient" in b)
    assert "show_attribute_values: false" in async_block


def test_the_built_site_works_from_disk() -> None:
    import yaml

    config = (HOOK.parents[2] / "mkdocs.yml").read_text("utf-8")
    loaded = yaml.safe_load(config.split("\nhooks:")[0])  # the part without !! tags
    assert loaded["use_directory_urls"] is False
