"""Local child processes, supervised: the one way the stack, the benchmarks and the test
fixtures start and stop redis-server, `swarm sim` and Celery workers.

    ports     loopback ports: a free one, is one open, small HTTP probes without a proxy
    groups    process groups: signal one, stop several (the stop signal, a grace period,
              then SIGKILL for what is left, orphans included)
    ready     readiness: wait until each process is ready, failing fast when one exits
    process   ``Process``: a child in its own session logging to a file, with its waits
    services  the project's services as processes: redis-server, the simulator, workers

Every child runs in its own session (process group id == its pid), so stopping it stops its
children too, and writes stdout and stderr to one log file, which the readiness waits read.
"""

from __future__ import annotations

from swarm.procs.groups import signal_group, stop_groups
from swarm.procs.ports import LOOPBACK, free_port, http_json, http_status, port_open
from swarm.procs.process import Process, cleanup, unique_log
from swarm.procs.ready import Readiness, wait_ready

__all__ = [
    "LOOPBACK",
    "Process",
    "Readiness",
    "cleanup",
    "free_port",
    "http_json",
    "http_status",
    "port_open",
    "signal_group",
    "stop_groups",
    "unique_log",
    "wait_ready",
]
