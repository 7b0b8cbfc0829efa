"""What the tracing hooks cost a node and a call while tracing is off (swarm.tracing).

With no OTEL_* exporter configured, each hook is a call that checks one module global and
hands back a shared no-op. This times the hooks a node passes through (the node thread's
context, the node span, its outcome) and the one a call passes through (the trace step's
factory, which adds no step), against an empty call, best of five runs of a million each.

    python ops/bench/tracing_off.py
"""

from __future__ import annotations

import timeit

from swarm import tracing
from swarm.calls import steps
from swarm.catalog import load_catalog
from swarm.records import JobSpec

RUNS = 1_000_000


def main() -> None:
    assert not tracing.setup("bench", environ={}), "tracing is on: this times the off path"
    catalog = load_catalog()
    spec = JobSpec(job_id="j", instruction="i", aggregate_instruction="a", model="kimi-k2.5",
                   aggregate_model="kimi-k2.5", node_ids=("n0",), input_refs=("r0",),
                   submitted_at=0.0)  # fmt: skip

    def per_node() -> None:
        with tracing.attached(None), tracing.node(spec, "n0", "live") as span:
            tracing.node_ended(span, None, catalog)

    def per_call() -> None:
        steps.tracing_attempts(None)  # type: ignore[arg-type]

    print("| hooks (tracing off) | ns each |\n|---|---|")
    for name, hook in (("per node: context, node span, outcome", per_node),
                       ("per call: the trace step's factory", per_call),
                       ("an empty call, for scale", lambda: None)):  # fmt: skip
        best = min(timeit.repeat(hook, number=RUNS, repeat=5)) / RUNS * 1e9
        print(f"| {name} | {best:.0f} |")


if __name__ == "__main__":
    main()
