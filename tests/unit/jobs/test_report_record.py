"""The typed Report: read from its JSON dict, its nodes built when first read, and back."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from swarm.jobs.report import NodeList, Report
from swarm.records import NodeEnvelope, Usage


def node(i: int, **extra: Any) -> dict[str, Any]:
    env = NodeEnvelope(node_id=f"n{i}", input_ref=f"f{i}", model="m", status="ok", content=f"c{i}")
    return {**env.model_dump(mode="json"), **extra}


def report_dict(nodes: list[dict[str, Any]]) -> dict[str, Any]:
    return Report(
        job_id="j", status="succeeded", total=len(nodes), succeeded=len(nodes), failed=0,
        final="f", wall_s=1.0, usage=Usage(prompt_tokens=3), cost_usd=0.5, models={},
        nodes=NodeList(nodes), aggregate_model="m",
    ).to_dict()  # fmt: skip


def test_a_report_round_trips_through_its_dict_and_json() -> None:
    data = report_dict([node(0), node(1)])
    report = Report.from_dict(data)
    assert report.to_dict() == data
    assert Report.model_validate_json(json.dumps(data)).to_dict() == data
    assert report.usage.prompt_tokens == 3 and report.nodes[1].content == "c1"
    assert [n.node_id for n in report.nodes[0:2]] == ["n0", "n1"] and len(report.nodes) == 2


def test_nodes_are_built_when_read() -> None:
    data = report_dict([node(0), node(1)])
    data["nodes"][1]["status"] = "maybe"  # not a node status: found only when that node is read
    report = Report.from_dict(data)
    assert report.nodes[0].status == "ok"
    assert report.to_dict()["nodes"][1]["status"] == "maybe"  # unread: dumped as stored
    with pytest.raises(ValidationError):
        report.nodes[1]


def test_fields_of_a_newer_report_are_left_out() -> None:
    data = {**report_dict([node(0, newer_node_field=64)]), "newer_report_field": 2}
    report = Report.from_dict(data)
    assert "newer_report_field" not in report.to_dict() and report.nodes[0].node_id == "n0"


def test_nodes_compare_as_lists() -> None:
    envs = [NodeEnvelope.model_validate(node(i)) for i in range(2)]
    assert NodeList([node(0), node(1)]) == envs and NodeList(envs) != envs[:1]
