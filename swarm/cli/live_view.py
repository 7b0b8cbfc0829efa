"""The live view of a running job on a terminal (rich): its phase, a bar of nodes ended, a
table per model (done, failed, cancelled once some are, in flight, 429s, retries, cost so
far), the cost so far against the budget, and an ETA."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from swarm.cli.snapshot import JobSnapshot, clock, counts
from swarm.cost.pricing import usd_text


def live_view(s: JobSnapshot) -> RenderableType:
    """What the terminal shows of ``s`` (redrawn at every reading)."""
    p = s.progress
    head = Text.assemble(
        ("swarm ", "bold"), f"job {s.job_id}  ", (s.phase, "bold cyan"), f"  {clock(s.elapsed_s)}"
    )
    tally = Table.grid(padding=(0, 1))
    tally.add_row(
        ProgressBar(total=max(p.total, 1), completed=s.finished_nodes, width=30),
        Text(f"{s.finished_nodes}/{p.total} sub-agents ended: {counts(p)}"),
    )
    money_line = f"cost so far {usd_text(s.cost_usd)}"
    if s.budget_usd is not None:
        money_line += f" of budget {usd_text(s.budget_usd)}"
    if s.eta_s is not None:
        money_line += f"   ETA {clock(s.eta_s)} (sub-agents)"
    return Group(head, tally, _models_table(s), Text(money_line))


def _models_table(s: JobSnapshot) -> Table:
    table = Table(box=None, pad_edge=False, show_edge=False)
    table.add_column("model", no_wrap=True)
    cancelled = s.progress.cancelled > 0
    heads = ("done", "failed", *(("cancelled",) if cancelled else ()), "in flight")
    for head in (*heads, "429s", "retries", "cost so far"):
        table.add_column(head, justify="right", no_wrap=True)
    names = sorted({*s.progress.models, *s.model_cost_usd, *s.rate_limited, *s.retries})
    for name in names:
        m = s.progress.models.get(name)
        table.add_row(
            name,
            str(m.done if m else 0),
            str(m.failed if m else 0),
            *((str(m.cancelled if m else 0),) if cancelled else ()),
            str(m.in_flight if m else 0),
            str(s.rate_limited.get(name, 0)),
            str(s.retries.get(name, 0)),
            usd_text(s.model_cost_usd.get(name, 0.0)),
        )
    return table
