"""Issue 40's cost benchmark: seed 000's 100-PR review with a shared repository context,
live without the cache warm-up, live with it, and with a deadline (Batch API), side by side.

Each run is one job in this process (swarm.testing.embedded: in-memory broker, in-process
worker) against its own fresh simulator with the providers' prompt cache on
(``SimConfig.prompt_cache``: a prefix is cached once the first request carrying it has been
answered, for later arrivals), so no run finds another's prefix cached. The model is the
seed's ``kimi-k2.5`` at the catalog's prices; every reviewer reads the same ~5,000-token
repository context (a synthetic map and conventions) before its PR's diff.

Prints the pre-flight estimate, then per run: status, wall time, cost, cached tokens, what
caching and the batch price saved, and the ledger's cached tokens against the simulator's.

    python ops/bench/cost.py                    # 100 PRs, 3 s answers, 5 s batch
    python ops/bench/cost.py --prs 30 --latency-ms 2000
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import swarm.testing
from swarm.calls.warmup import warmup_floor
from swarm.catalog import AGGREGATE_KIND, load_catalog
from swarm.cost.batch import at_batch_price
from swarm.jobs.estimate import estimate_job
from swarm.jobs.review import REVIEW_AGGREGATE, REVIEW_INSTRUCTION, REVIEW_SCHEMA
from swarm.records import InputItem
from swarm.settings import load_settings
from swarm.sim import SimConfig, start_in_thread
from swarm.sim.batch_config import BatchSimConfig
from swarm.tokens import estimate_tokens

MODEL = "kimi-k2.5"
"""Seed 000's model."""
MAX_TOKENS = 2048
"""Seed 000's max_tokens per sub-agent."""


def repository_context(tokens: int) -> str:
    """A synthetic repository map and conventions of about ``tokens`` tokens."""
    lines: list[str] = ["Repository map and conventions (shared by every reviewer)."]
    i = 0
    while estimate_tokens("\n".join(lines)) < tokens:
        lines.append(
            f"- services/billing/module_{i:03d}.py: one concept per module; typed frozen "
            f"records; errors derive from BillingError; log decisions at DEBUG; no network "
            f"in tests; money as integer cents (rule {i})."
        )
        i += 1
    return "\n".join(lines)


def pull_requests(count: int) -> list[InputItem]:
    """Seed 000's inputs: one PR diff per sub-agent (small synthetic diffs)."""
    return [
        InputItem(
            ref=f"PR #{i}",
            text=(
                f"Review PR #{i}'s diff.\n"
                f"--- a/services/billing/module_{i:03d}.py\n"
                f"+++ b/services/billing/module_{i:03d}.py\n"
                f"@@ -10,6 +10,8 @@\n-    total = price * qty\n+    total = round(price * qty, 2)\n"
                f"+    log.info('total %s for order %s', total, order_id)\n"
            ),
        )
        for i in range(count)
    ]


def run(args: argparse.Namespace, label: str, warmup: bool, deadline_s: float | None,
        items: list[InputItem], context: str) -> dict[str, Any]:  # fmt: skip
    """One job on a fresh simulator: its report and the simulator's counters."""
    batch = BatchSimConfig(processing_s=args.batch_s)
    config = SimConfig(latency_ms=args.latency_ms, prompt_cache=True, batch=batch)
    with start_in_thread(config) as sim:
        with swarm.testing.embedded(
            base_url=sim.base_url, api_key="bench", worker_concurrency=args.threads,
            cache_warmup=warmup,
        ) as client:  # fmt: skip
            started = time.monotonic()
            handle = client.submit(
                items, REVIEW_INSTRUCTION, aggregate_instruction=REVIEW_AGGREGATE,
                model=MODEL, max_tokens=MAX_TOKENS, output_schema=REVIEW_SCHEMA,
                context=context, deadline_s=deadline_s,
            )  # fmt: skip
            report = handle.wait(timeout=args.timeout_s).to_dict()
            wall = time.monotonic() - started
        stats = sim.stats()
    return {"label": label, "report": report, "stats": stats, "wall_s": wall}


def row(result: dict[str, Any]) -> str:
    """One Markdown table row."""
    report, stats = result["report"], result["stats"]
    line = report["models"].get(MODEL, {})
    cells = [
        result["label"], report["status"], f"{result['wall_s']:.1f}",
        f"{report['cost_usd']:.6f}", f"{report['usage']['prompt_tokens']:,}",
        f"{report['usage']['cached_tokens']:,}", f"{line.get('cache_saved_usd', 0.0):.6f}",
        str(line.get("batch_calls", 0)), f"{line.get('saved_usd', 0.0):.6f}",
        f"{stats['cached_tokens']:,}",
    ]  # fmt: skip
    return "| " + " | ".join(cells) + " |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prs", type=int, default=100)
    parser.add_argument("--context-tokens", type=int, default=5000)
    parser.add_argument("--latency-ms", type=float, default=3000.0)
    parser.add_argument("--batch-s", type=float, default=5.0)
    parser.add_argument("--threads", type=int, default=110)
    parser.add_argument("--timeout-s", type=float, default=600.0)
    args = parser.parse_args()
    items, context = pull_requests(args.prs), repository_context(args.context_tokens)
    catalog = load_catalog()
    model, aggregate = catalog.model(MODEL), catalog.route(AGGREGATE_KIND)
    bound = estimate_job(items, REVIEW_INSTRUCTION, REVIEW_AGGREGATE, model, aggregate,
                         MAX_TOKENS, context=context,
                         warmup_min_tokens=warmup_floor(load_settings()))  # fmt: skip
    batched = at_batch_price(bound, model)
    print(f"{args.prs} PRs on {MODEL}, shared context ~{estimate_tokens(context):,} tokens, "
          f"live answers {args.latency_ms:.0f} ms, batch {args.batch_s:g} s\n")  # fmt: skip
    print(f"pre-flight: bound ${bound.total_usd:.6f} (every prompt uncached); expected with "
          f"{bound.cached_tokens:,} cached tokens ${bound.expected_usd:.6f}; with a deadline "
          f"(batch) bound ${batched.total_usd:.6f}\n")  # fmt: skip
    runs = [
        run(args, "live, no warm-up", False, None, items, context),
        run(args, "live, warm-up", True, None, items, context),
        run(args, "deadline (batch)", True, 3600.0, items, context),
    ]
    print("| run | status | wall s | cost USD | prompt tokens | cached tokens | cache saved "
          "USD | batch calls | batch saved USD | simulator cached |")  # fmt: skip
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for result in runs:
        print(row(result))
    cold, warm = runs[0]["report"]["cost_usd"], runs[1]["report"]["cost_usd"]
    print(f"\nwarm-up / no warm-up cost: {warm / cold:.3f}; "
          f"batch / no warm-up: {runs[2]['report']['cost_usd'] / cold:.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
