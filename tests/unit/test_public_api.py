"""The curated public API: a name appearing or disappearing is a decision, not an accident."""

from __future__ import annotations

import swarm

EXPECTED = {
    "AsyncSwarmClient",
    "AsyncSwarmHandle",
    "JobProgress",
    "BrokerUnavailableError",
    "BudgetExceededError",
    "Catalog",
    "ConfigError",
    "ErrorKind",
    "GatewayUnavailableError",
    "InputError",
    "InputItem",
    "JobNotFinishedError",
    "JobNotFoundError",
    "JobSpec",
    "JobTimeoutError",
    "MissingKeyError",
    "ModelSpec",
    "NodeEnvelope",
    "Report",
    "Settings",
    "SwarmClient",
    "SwarmError",
    "SwarmHandle",
    "Tool",
    "UnknownModelError",
    "Usage",
    "attach",
    "load_catalog",
    "load_settings",
    "submit",
    "tool",
}


def test_exported_members() -> None:
    assert set(swarm.__all__) == EXPECTED
    for name in swarm.__all__:
        assert getattr(swarm, name) is not None


def test_every_error_has_one_root() -> None:
    errors = [getattr(swarm, n) for n in swarm.__all__ if n.endswith("Error")]
    assert all(issubclass(e, swarm.SwarmError) for e in errors)


def test_domain_never_imports_workers() -> None:
    import pathlib

    root = pathlib.Path(swarm.__file__).parent
    offenders = [
        str(p.relative_to(root))
        for p in root.rglob("*.py")
        if "from workers" in p.read_text() or "import workers" in p.read_text()
    ]
    assert offenders == ["embedded.py"]  # the embedded mode's in-process worker
