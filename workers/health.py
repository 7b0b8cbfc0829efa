"""Container healthcheck of a worker: ``python -m workers.health``.

Exit 0 when a Celery node of this host (``<name>@<hostname>``) answers a ping through the
broker, 1 otherwise. The node name is not known here (compose gives each service its own), so
every node is pinged and the answers are matched by host name.
"""

from __future__ import annotations

import socket
import sys

from swarm.catalog import load_catalog
from swarm.jobs.queueing import make_celery
from swarm.settings import Settings, load_settings

TIMEOUT_S = 5.0


def node_alive(settings: Settings, hostname: str, timeout_s: float = TIMEOUT_S) -> bool:
    """True when a node named ``*@hostname`` answers a broadcast ping within ``timeout_s``."""
    app = make_celery(settings, load_catalog(settings.config), name="health")
    try:
        replies = app.control.ping(timeout=timeout_s) or []
    finally:
        app.close()
    return any(node.endswith(f"@{hostname}") for reply in replies for node in reply)


def main() -> int:
    """The healthcheck's exit status."""
    try:
        alive = node_alive(load_settings(), socket.gethostname())
    except Exception as exc:  # any failure (config, broker down) means unhealthy
        print(f"unhealthy: {exc}", file=sys.stderr)
        return 1
    if not alive:
        print(f"unhealthy: no worker node @{socket.gethostname()} answered", file=sys.stderr)
    return 0 if alive else 1


if __name__ == "__main__":
    sys.exit(main())
