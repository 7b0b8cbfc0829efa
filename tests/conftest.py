"""Suite-wide, light-weight test configuration. Nothing here starts a process or imports
project code; integration machinery lives in tests/integration/conftest.py."""

from __future__ import annotations

import ctypes
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


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups (--dist loadgroup)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests sharing a module's fixture get one xdist group; tests marked ``glibc`` are
    skipped where the C library is not glibc 2.33 or newer, except under CI, where they run
    (and fail there); tests marked ``real_llm`` run only when a ``-m`` expression names
    them."""
    no_glibc = None if _in_ci() else _without_glibc()
    for item in items:
        group = _shared_fixture_group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
        if no_glibc and item.get_closest_marker("glibc") is not None:
            item.add_marker(pytest.mark.skip(reason=no_glibc))
    if "real_llm" in (config.getoption("markexpr", "") or ""):
        return
    kept = [item for item in items if item.get_closest_marker("real_llm") is None]
    if len(kept) != len(items):
        config.hook.pytest_deselected(items=[i for i in items if i not in kept])
        items[:] = kept


def _without_glibc() -> str | None:
    """Why glibc tests cannot run here (no glibc with ``mallinfo2``), or None."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return "no glibc"
    return None if hasattr(libc, "mallinfo2") else "glibc older than 2.33 (no mallinfo2)"


_SHARED_SCOPES = frozenset({"module", "class", "package"})


def _shared_fixture_group(item: pytest.Item) -> str | None:
    """The xdist group of a test that uses a fixture wider than the test (a module's
    workers and brokers), or None for a test that can run on any worker.

    ``./ops/test`` runs pytest-xdist with ``--dist loadgroup``: a test without a group goes to
    whichever worker is free, the tests of one group go to one worker, which builds the
    module's fixture once, as a serial run does. A module-scoped fixture parametrised by
    broker (tests/integration/conftest.py: ``broker_fs``) gives one group per parameter: its
    Redis half and its RabbitMQ half are two stacks anyway, and may run side by side."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    shared = sorted(
        name
        for name, defs in info.name2fixturedefs.items()
        if defs and defs[-1].scope in _SHARED_SCOPES
    )
    if not shared:
        return None
    params = getattr(getattr(item, "callspec", None), "params", {})
    picked = [f"{name}={params[name]}" for name in shared if name in params]
    module = item.nodeid.split("::", 1)[0]
    return f"{module}[{','.join(picked)}]" if picked else module
