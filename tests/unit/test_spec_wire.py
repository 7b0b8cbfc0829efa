"""The stored JobSpec stays readable by workers of the release before its newer optional
fields while a job uses none of them (a rolling upgrade: producers first)."""

from __future__ import annotations

import json

from doubles import job_spec
from pydantic import ConfigDict, create_model

from swarm.records import SPEC_OPTIONAL, JobSpec


def older_spec() -> type[JobSpec]:
    """JobSpec as a worker of the release before read it: without the optional fields, and
    refusing unknown ones."""
    fields = {
        name: (info.annotation, info)
        for name, info in JobSpec.model_fields.items()
        if name not in SPEC_OPTIONAL
    }
    config = ConfigDict(frozen=True, extra="forbid")
    return create_model("OlderJobSpec", __config__=config, **fields)  # type: ignore[call-overload, no-any-return]


def test_a_spec_without_the_new_fields_is_stored_as_before() -> None:
    spec = job_spec(3)
    stored = json.loads(spec.to_json())
    assert not set(SPEC_OPTIONAL) & set(stored)
    older_spec().model_validate_json(spec.to_json())  # an older worker reads it
    assert JobSpec.model_validate_json(spec.to_json()) == spec


def test_a_spec_that_uses_them_keeps_them() -> None:
    spec = job_spec(2, context="the repository's conventions", trace_parent="00-ab-cd-01")
    stored = json.loads(spec.to_json())
    assert stored["context"] == "the repository's conventions"
    assert stored["trace_parent"] == "00-ab-cd-01"
    assert JobSpec.model_validate_json(spec.to_json()) == spec
