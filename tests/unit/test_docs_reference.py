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
