"""Unit-test fixtures: a Runtime over a mock gateway and an in-memory store."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from doubles import Handler, MockGateway

from swarm.calls.runtime import Runtime
from swarm.catalog import load_catalog
from swarm.settings import Settings
from swarm.store import MemoryJobStore


@pytest.fixture(autouse=True)
def _no_user_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unit tests never see the user's SWARM_* or OPENAI_API_KEY (a broker URL exported as
    the README says would otherwise switch modes under them)."""
    for name in list(os.environ):
        if name.startswith("SWARM_") or name == "OPENAI_API_KEY":
            monkeypatch.delenv(name)


@pytest.fixture
def fast_settings() -> Settings:
    return Settings(max_attempts=3, backoff_max_s=0.01, node_timeout_s=5)


@pytest.fixture
def make_runtime(fast_settings: Settings) -> Callable[[Handler], tuple[Runtime, MockGateway]]:
    def make(handler: Handler) -> tuple[Runtime, MockGateway]:
        gw = MockGateway(handler)
        rt = Runtime(fast_settings, load_catalog(), MemoryJobStore(), gw.client())
        return rt, gw

    return make
