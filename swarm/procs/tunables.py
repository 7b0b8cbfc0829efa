"""glibc tunables for worker processes: the per-thread malloc cache (tcache) turned off.

Each of a worker's threads keeps up to 7 freed chunks of each of 64 sizes in glibc's
tcache, which ``malloc_trim`` does not return and which keeps the free chunks beside them
from merging, so a worker's memory grows with the size of the jobs it ran
(ops/bench/results/scale.md, "glibc's per-thread caches"). glibc reads
``GLIBC_TUNABLES`` only as a process starts (no ``mallopt`` sets it), so whoever starts a
worker sets it: docker-compose.yml, ``swarm stack`` (the compose file's value ``merge``d
with the operator's own variable, swarm.stack.runner.process_env) and the scale bench
(``with_tcache_off``).
"""

from __future__ import annotations

from collections.abc import Mapping

TUNABLES_ENV = "GLIBC_TUNABLES"
"""The variable glibc reads its tunables from: ``name=value`` pairs joined by ``:``."""
TCACHE_COUNT = "glibc.malloc.tcache_count"
"""The most freed chunks a thread's cache keeps per size (glibc's default: 7)."""
TCACHE_OFF = f"{TCACHE_COUNT}=0"
"""The workers' default tunable: no per-thread cache."""


def pairs(tunables: str | None) -> dict[str, str]:
    """The ``name=value`` pairs of a ``GLIBC_TUNABLES`` value, by name, in order."""
    found: dict[str, str] = {}
    for pair in (tunables or "").split(":"):
        name = pair.split("=", 1)[0].strip()
        if name:
            found[name] = pair.strip()
    return found


def merge(defaults: str, tunables: str | None) -> str:
    """``GLIBC_TUNABLES`` of ``defaults`` under ``tunables``: every pair of ``tunables``
    (the operator's: they win), and those of ``defaults`` it does not name."""
    ours = pairs(defaults)
    theirs = pairs(tunables)
    kept = [pair for name, pair in ours.items() if name not in theirs]
    return ":".join([*kept, *theirs.values()])


def with_tcache_off(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` with ``GLIBC_TUNABLES`` carrying ``tcache_count=0``, unless it sets
    ``tcache_count`` itself; its other tunables are kept."""
    return {**environ, TUNABLES_ENV: merge(TCACHE_OFF, environ.get(TUNABLES_ENV))}
