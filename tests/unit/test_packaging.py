"""Every folder of Python modules is a regular package, so that a non-editable install
(the image's ``pip install .``, found by setuptools' ``packages.find``) ships it."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("top", ["swarm", "workers"])
def test_every_folder_of_modules_has_an_init(top: str) -> None:
    folders = {path.parent for path in (ROOT / top).rglob("*.py")}
    missing = sorted(str(f.relative_to(ROOT)) for f in folders if not (f / "__init__.py").exists())
    assert missing == []
