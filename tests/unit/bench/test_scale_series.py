"""The scale bench's RSS series: each worker's RSS at fractions of the job's nodes ended."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SCALE = Path(__file__).resolve().parents[3] / "ops" / "bench" / "scale.py"


def load_scale() -> ModuleType:
    """ops/bench/scale.py (a script, not a package) as a module."""
    spec = importlib.util.spec_from_file_location("scale_bench", SCALE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def row(scale: ModuleType, inputs: int, samples: list[tuple[int, float]]) -> object:
    series = tuple(scale.RssSample(done, (mb, mb + 1)) for done, mb in samples)
    return scale.Row(
        inputs=inputs, submit_s=1.0, producer_mb=90.0, wall_s=10.0, redis_peak_mb=1.0,
        bytes_per_node=1.0, by_kind={}, report_json_bytes=1, report_json_s=0.1,
        summary_bytes=1, summary_s=0.1, workers_peak_mb=1.0, workers_end_mb=1.0,
        workers_each_mb=(1.0, 1.0), workers_cpu_ms=1.0, redis_cpu_ms=1.0,
        workers_before_mb=(100.0, 101.0), series=series, job=2,
    )  # fmt: skip


def test_each_fraction_takes_the_first_sample_at_or_past_it() -> None:
    scale = load_scale()
    samples = [(0, 100.0), (90, 110.0), (260, 120.0), (500, 121.0), (990, 122.0), (1000, 123.0)]
    points = scale.series_points(row(scale, 1000, samples))
    assert [(label, s.done, s.each_mb) for label, s in points] == [
        ("before", 0, (100.0, 101.0)),
        ("10%", 260, (120.0, 121.0)),
        ("25%", 260, (120.0, 121.0)),
        ("50%", 500, (121.0, 122.0)),
        ("75%", 990, (122.0, 123.0)),
        ("100%", 1000, (123.0, 124.0)),
        ("report", 1000, (123.0, 124.0)),
    ]


def test_the_table_names_the_job_and_sums_the_workers() -> None:
    scale = load_scale()
    text = scale.series_table([row(scale, 1000, [(1000, 120.0)])])
    assert "| 1,000 | 2 | 50% | 1,000 | 241.0 (120.0 + 121.0) |" in text
    assert "| 1,000 | 2 | before | 0 | 201.0 (100.0 + 101.0) |" in text
