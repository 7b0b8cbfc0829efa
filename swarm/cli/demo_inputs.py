"""Synthetic inputs for `swarm demo`: small PR diffs of an imaginary monorepo."""

from __future__ import annotations

import random

from swarm.records import InputItem

DEMO_INSTRUCTION = (
    "Review this pull-request diff. List bugs, security risks and missing tests, each with "
    "severity (high/medium/low) and the file and line it concerns."
)
DEMO_AGGREGATE = (
    "Write the review summary of this monorepo's pull requests: the highest-severity findings "
    "first, grouped by service, each naming the PRs it concerns."
)

_SERVICES = ("billing", "auth", "search", "gateway", "notifications", "ledger", "web", "infra")
_CHANGES = (
    ("retry on timeout", "    resp = session.get(url)\n+    resp = session.get(url, timeout=5)"),
    ("cache user lookups", "-    user = db.get(uid)\n+    user = cache.get(uid) or db.get(uid)"),
    ("raise page size", "-PAGE_SIZE = 50\n+PAGE_SIZE = 5000"),
    ("log request body", "+    log.info('request %s', request.body)"),
    ("parse amounts", "-    amount = int(raw)\n+    amount = float(raw)"),
    ("drop input check", "-    if not token:\n-        raise Unauthorized()"),
)


def demo_inputs(n: int, seed: int = 0) -> list[InputItem]:
    """``n`` deterministic PR diffs."""
    rng = random.Random(seed)
    items = []
    for i in range(n):
        service = rng.choice(_SERVICES)
        title, hunk = rng.choice(_CHANGES)
        line = rng.randint(10, 400)
        text = (
            f"PR #{1000 + i}: {service}: {title}\n"
            f"diff --git a/services/{service}/handler.py b/services/{service}/handler.py\n"
            f"--- a/services/{service}/handler.py\n+++ b/services/{service}/handler.py\n"
            f"@@ -{line},6 +{line},6 @@\n{hunk}\n"
        )
        items.append(InputItem(ref=f"demo:pr-{1000 + i}", text=text))
    return items
