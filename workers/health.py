"""Container healthcheck of a worker: ``python -m workers.health [NODE]``.

Exit 0 when this container's Celery node answers a ping through the broker, 1 otherwise.
Only that node is pinged (a ``destination``), and the check returns as soon as it replies,
so one check costs the imports plus one broker round trip, whatever the number of replicas.

NODE is the worker's node name (``-n``; ``%h``, ``%n`` and ``%d`` are expanded as Celery
does). Without it, the name is read from the command line of the ``celery ... worker``
process of this container (``/proc/<pid>/cmdline``): its ``-n``/``--hostname``, or Celery's
default ``celery@<hostname>``.

The check runs every few seconds in every worker container, so it imports Celery only, not
the swarm package (a fifth of the import time): it reads the one setting it needs,
SWARM_BROKER_URL, itself, and a ping needs none of swarm's Celery configuration (control
messages use Celery's defaults on both sides).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from celery import Celery
from celery.utils.nodenames import default_nodename, host_format

TIMEOUT_S = 2.0
"""How long the ping waits for the node's reply."""
BROKER_ENV = "SWARM_BROKER_URL"
SENTINEL_MASTER_ENV = "SWARM_SENTINEL_MASTER"
SENTINEL_PASSWORD_ENV = "SWARM_SENTINEL_PASSWORD"
PROC = Path("/proc")
_NODE_FLAGS = ("-n", "--hostname")
_URL_CREDENTIALS = re.compile(r"(?<=://)[^/@\s]*@")


def node_name(value: str | None) -> str:
    """The node name Celery gives a worker started with ``-n value`` (None: no ``-n``)."""
    return str(host_format(default_nodename(value)))


def hostname_option(argv: Sequence[str]) -> str | None:
    """The value of ``-n``/``--hostname`` in a worker's argv (last one wins), or None."""
    found = None
    for i, arg in enumerate(argv):
        flag, eq, value = arg.partition("=")
        if flag in _NODE_FLAGS:
            found = value if eq else (argv[i + 1] if i + 1 < len(argv) else None)
        elif arg.startswith("-n") and len(arg) > 2 and not arg.startswith("--"):
            found = arg[2:]
    return found


def is_celery_worker(argv: Sequence[str]) -> bool:
    """True for ``celery ... worker ...`` (also run as ``python -m celery`` or a script path)."""
    for i, arg in enumerate(argv):
        if os.path.basename(arg) == "celery" or (arg == "-m" and argv[i + 1 : i + 2] == ["celery"]):
            return "worker" in argv[i + 1 :]
    return False


def worker_argvs(proc: Path = PROC) -> Iterator[list[str]]:
    """The argv of every celery worker process visible here, lowest pid first."""
    pids = sorted(int(p.name) for p in proc.iterdir() if p.name.isdigit())
    for pid in pids:
        try:
            raw = (proc / str(pid) / "cmdline").read_bytes()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        argv = [a.decode(errors="replace") for a in raw.split(b"\0") if a]
        if is_celery_worker(argv):
            yield argv


def local_node(proc: Path = PROC) -> str | None:
    """The node name of this container's worker, or None when no worker process runs here."""
    for argv in worker_argvs(proc):
        return node_name(hostname_option(argv))
    return None


def sentinel_options(broker_url: str, env: Mapping[str, str]) -> dict[str, object]:
    """kombu's Sentinel transport options for a ``sentinel://`` broker (as the worker's)."""
    if not broker_url.lower().startswith("sentinel://"):
        return {}
    options: dict[str, object] = {"master_name": env.get(SENTINEL_MASTER_ENV)}
    if env.get(SENTINEL_PASSWORD_ENV):
        options["sentinel_kwargs"] = {"password": env[SENTINEL_PASSWORD_ENV]}
    return options


def node_alive(broker_url: str, node: str, timeout_s: float = TIMEOUT_S) -> bool:
    """True when ``node`` answers a ping sent to it alone within ``timeout_s``."""
    options = {"broker_transport_options": sentinel_options(broker_url, os.environ)}
    app = Celery("health", broker=broker_url, changes=options, set_as_current=False)
    try:
        replies = app.control.ping(destination=[node], timeout=timeout_s) or []
    finally:
        app.close()
    return any(node in reply for reply in replies)


def check(argv: Sequence[str]) -> tuple[bool, str]:
    """(healthy, what to say) for the command line ``argv`` (the optional NODE)."""
    broker_url = os.environ.get(BROKER_ENV)
    if not broker_url:
        return False, f"unhealthy: {BROKER_ENV} is not set"
    node = node_name(argv[0]) if argv else local_node()
    if node is None:
        return False, "unhealthy: no celery worker process runs here"
    if not node_alive(broker_url, node):
        return False, f"unhealthy: {node} did not answer a ping within {TIMEOUT_S:g} s"
    return True, f"healthy: {node} answered"


def main(argv: Sequence[str] | None = None) -> int:
    """The healthcheck's exit status (its one line goes to stdout or stderr)."""
    try:
        healthy, message = check(sys.argv[1:] if argv is None else argv)
    except Exception as exc:  # any failure (config, broker down) means unhealthy
        reason = _URL_CREDENTIALS.sub("***@", str(exc))  # a broker URL can carry a password
        healthy, message = False, f"unhealthy: {type(exc).__name__}: {reason}"
    print(message, file=sys.stdout if healthy else sys.stderr)
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(main())
