"""Suite-wide, light-weight test configuration. Nothing here starts a process or imports
project code; integration machinery lives in tests/integration/conftest.py."""

from __future__ import annotations

import os

import pytest


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"true", "1", "yes"}


@pytest.fixture(scope="session")
def ci() -> bool:
    """True under CI (env ``CI=true``): missing services must fail there, never skip."""
    return _in_ci()


def pytest_report_header(config: pytest.Config) -> list[str]:
    ext = os.environ.get("SWARM_TEST_REDIS_URL")
    redis = f"SWARM_TEST_REDIS_URL={ext}" if ext else "private redis-server on a free port"
    return [f"swarm: CI={'yes' if _in_ci() else 'no'}; integration redis: {redis}"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``real_llm`` run only when a ``-m`` expression names them."""
    if "real_llm" in (config.getoption("markexpr", "") or ""):
        return
    kept = [item for item in items if item.get_closest_marker("real_llm") is None]
    if len(kept) != len(items):
        config.hook.pytest_deselected(items=[i for i in items if i not in kept])
        items[:] = kept
