"""Backend limits: models served by one backend share its in-flight and rate limits."""

from __future__ import annotations

import pytest
import redis

from swarm.calls.admission import AdmissionPolicy, MemoryAdmission, Refusal
from swarm.calls.admission.backend import BackendAdmission
from swarm.calls.admission.base import Ask, Decision, Outcome
from swarm.calls.local.adaptive import MemoryAdaptive
from swarm.catalog import Catalog, ModelSpec, parse_catalog
from swarm.errors import ConfigError


def model(name: str, backend: str | None, max_inflight: int = 10) -> str:
    line = f'backend = "{backend}"\n' if backend else ""
    return f"""
[models.{name}]
gateway_name = "{name}"
queue = "llm.{name}"
{line}input_per_mtok_usd = 0
output_per_mtok_usd = 0
cached_input_per_mtok_usd = 0
rpm = 100000
tpm = 100000000
max_inflight = {max_inflight}
context_window = 4096
max_tokens = 16
"""


ROUTING = '\n[routing]\ndefault = ["a"]\naggregate = ["b"]\n'


def catalog(backends: str, a: str | None = "one", b: str | None = "one") -> Catalog:
    return parse_catalog(backends + model("a", a) + model("b", b) + ROUTING)


def controller(cat: Catalog) -> BackendAdmission:
    return BackendAdmission(MemoryAdmission(AdmissionPolicy()), cat, MemoryAdaptive())


def test_two_models_of_one_backend_share_its_in_flight_limit() -> None:
    cat = catalog("[backends.one]\nmax_inflight = 1\n")
    ctl = controller(cat)
    a, b = cat.model("a"), cat.model("b")
    first = ctl.acquire(a, Ask("j1", 10))
    assert first.permit is not None
    refused = ctl.acquire(b, Ask("j1", 10))
    assert refused.permit is None and refused.reason is Refusal.INFLIGHT
    ctl.finish(a, first.permit, Outcome(used_tokens=12))
    assert ctl.acquire(b, Ask("j1", 10)).permit is not None
    assert ctl.backend_counters(cat.backends["one"]).inflight == 1


def test_a_model_refusal_gives_the_backend_permit_back() -> None:
    cat = parse_catalog(
        "[backends.one]\nmax_inflight = 5\n" + model("a", "one", 1) + model("b", "one") + ROUTING
    )
    ctl = controller(cat)
    a = cat.model("a")
    assert ctl.acquire(a, Ask("j1", 10)).permit is not None
    refused = ctl.acquire(a, Ask("j1", 10))
    assert refused.permit is None and refused.reason is Refusal.INFLIGHT
    assert ctl.backend_counters(cat.backends["one"]).inflight == 1


def test_a_backend_rpm_holds_its_models_together() -> None:
    cat = catalog("[backends.one]\nrpm = 1\nmax_inflight = 9\n")
    ctl = controller(cat)
    assert ctl.acquire(cat.model("a"), Ask("j1", 10)).permit is not None
    refused = ctl.acquire(cat.model("b"), Ask("j1", 10))
    assert refused.permit is None and refused.reason is Refusal.RPM


def test_models_without_a_declared_backend_have_no_shared_limits() -> None:
    cat = catalog("", a=None, b=None)
    backend = cat.backends["default"]
    assert backend.implicit and not backend.has_limits and not backend.is_adaptive
    ctl = controller(cat)
    assert ctl.acquire(cat.model("a"), Ask("j1", 10)).permit is not None
    assert ctl.acquire(cat.model("b"), Ask("j1", 10)).permit is not None


@pytest.mark.parametrize(
    ("backends", "adaptive"),
    [
        ("[backends.one]\n", False),  # hosted (the default): its limits are the catalog's
        ('[backends.one]\nkind = "local"\n', True),  # local, no in-flight limit: found
        ('[backends.one]\nkind = "local"\nmax_inflight = 4\n', False),  # configured: kept
        ("[backends.one]\nmax_inflight = 4\nadaptive = true\n", True),  # marked adaptive
    ],
)
def test_which_backends_adapt(backends: str, adaptive: bool) -> None:
    assert catalog(backends).backends["one"].is_adaptive is adaptive


def test_an_unknown_backend_is_one_line_naming_the_field() -> None:
    with pytest.raises(ConfigError, match=r"backend in \[models\.a\]: unknown backend 'two'"):
        catalog("[backends.one]\n", a="two")


def test_the_packaged_catalog_declares_a_hosted_gateway_without_shared_limits() -> None:
    from swarm.catalog import load_catalog

    cat = load_catalog()
    backends = {cat.backend_of(spec) for spec in cat.models.values()}
    assert [b.name for b in backends] == ["default"]
    (default,) = backends
    assert default.kind == "hosted" and not default.is_local
    assert not default.is_adaptive and not default.has_limits  # only each model's limits


def test_a_local_backend_starts_from_its_models_own_limits() -> None:
    cat = catalog('[backends.one]\nkind = "local"\n')
    (backend,) = cat.backends.values()
    assert backend.is_adaptive
    # before any answer, the backend admits what its models' own limits admit together
    cap = sum(spec.max_inflight for spec in cat.models.values())
    assert controller(cat).backend_spec(backend).max_inflight == cap


class Flaky(MemoryAdmission):
    """Memory admission whose calls for model ``a`` meet a Redis outage when told to."""

    def __init__(self) -> None:
        super().__init__(AdmissionPolicy())
        self.down: set[str] = set()

    def acquire(self, spec: ModelSpec, ask: Ask) -> Decision:
        if spec.name == "a" and "acquire" in self.down:
            raise redis.exceptions.ConnectionError("failover under way")
        return super().acquire(spec, ask)

    def finish(self, spec, permit, outcome):  # type: ignore[no-untyped-def]
        if spec.name == "a" and "finish" in self.down:
            raise redis.exceptions.ConnectionError("failover under way")
        return super().finish(spec, permit, outcome)


def test_an_outage_after_the_backends_permit_lets_it_go() -> None:
    cat = catalog("[backends.one]\nmax_inflight = 1\n")
    inner = Flaky()
    ctl = BackendAdmission(inner, cat, MemoryAdaptive())
    inner.down = {"acquire"}
    with pytest.raises(redis.exceptions.ConnectionError):
        ctl.acquire(cat.model("a"), Ask("j1", 10))
    assert ctl.backend_counters(cat.backends["one"]).inflight == 0
    assert ctl.acquire(cat.model("b"), Ask("j1", 10)).permit is not None


def test_an_outage_finishing_the_models_permit_still_releases_the_backends() -> None:
    cat = catalog("[backends.one]\nmax_inflight = 1\n")
    inner = Flaky()
    ctl = BackendAdmission(inner, cat, MemoryAdaptive())
    permit = ctl.acquire(cat.model("a"), Ask("j1", 10)).permit
    assert permit is not None
    inner.down = {"finish"}
    with pytest.raises(redis.exceptions.ConnectionError):
        ctl.finish(cat.model("a"), permit, Outcome(used_tokens=12))
    assert ctl.backend_counters(cat.backends["one"]).inflight == 0
    assert ctl.acquire(cat.model("b"), Ask("j1", 10)).permit is not None
