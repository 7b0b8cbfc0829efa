"""The local kit (swarm.calls.local.kit): built only for a catalog with a local backend."""

from __future__ import annotations

import pytest
from doubles import as_local

import swarm.testing
from swarm.calls.admission.backend import BackendAdmission
from swarm.calls.local.kit import needs_kit
from swarm.calls.local_steps import kit_of
from swarm.calls.runtime import Runtime
from swarm.catalog import Catalog, load_catalog
from swarm.errors import ConfigError
from swarm.settings import Settings
from swarm.store import MemoryJobStore
from workers import process


def test_only_a_local_or_adaptive_backend_needs_the_kit() -> None:
    hosted = load_catalog()
    assert not needs_kit(hosted)
    assert needs_kit(as_local(hosted))
    adaptive = {
        name: spec.model_copy(update={"adaptive": True}) for name, spec in hosted.backends.items()
    }
    assert needs_kit(hosted.model_copy(update={"backends": adaptive}))


def _embedded_run(catalog: Catalog) -> Runtime:
    with swarm.testing.embedded(catalog=catalog) as client:
        report = client.submit(["a", "b"], "Summarise").wait(timeout=60)
        assert report.status == "succeeded"
        runtime = process.get()
    return runtime


def test_a_hosted_catalogs_process_builds_no_local_kit() -> None:
    runtime = _embedded_run(load_catalog())
    assert runtime.local is None
    assert isinstance(runtime.admission, BackendAdmission) and runtime.admission.adaptive is None


def test_a_local_catalogs_process_shares_its_adaptive_limits_with_admission() -> None:
    runtime = _embedded_run(as_local(load_catalog()))
    assert runtime.local is not None
    assert isinstance(runtime.admission, BackendAdmission)
    assert runtime.admission.adaptive is runtime.local.adaptive
    assert runtime.local.overtime.enabled  # from the settings (SWARM_OVERTIME_*), not off


def test_a_local_call_without_a_kit_says_so() -> None:
    runtime = Runtime(Settings(), as_local(load_catalog()), MemoryJobStore(), client=None)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="LocalKit"):
        kit_of(runtime)
