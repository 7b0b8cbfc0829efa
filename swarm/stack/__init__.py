"""The compose stack as local processes: `swarm stack up|down|status`.

docker-compose.yml is the one definition of the deployment; ``compose`` reads it, ``plan``
turns its services into local processes (addresses and ports made local), ``runner`` starts
and stops them, ``state`` remembers what was started, and ``launch`` does all of `up`.
This package's own module holds only the defaults `swarm stack`'s options show.
"""

from __future__ import annotations

from pathlib import Path

DEFAULT_RUN_DIR = Path(".swarm-stack")
"""Folder of a stack's state file, logs and Redis data."""
DEFAULT_TIMEOUT_S = 90.0
"""Seconds `swarm stack up` waits for every process to be ready."""
