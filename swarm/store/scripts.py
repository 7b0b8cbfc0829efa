"""The Lua scripts of the Redis job store, read from the package's ``lua/*.lua`` files.

Each script runs atomically on the Redis server; redis-py's Script calls it by SHA and
loads it again after a SCRIPT FLUSH or a server restart. Every key a script touches
belongs to one job and carries its hash tag, so the scripts also run on Redis Cluster.
"""

from __future__ import annotations

from importlib import resources

import redis
from redis.commands.core import Script

SCRIPTS = ("record", "reserve", "release", "unclaim", "reopen", "finish")
"""Names of the scripts (swarm/store/lua/<name>.lua); each file documents its keys."""


def script_text(name: str) -> str:
    """Source of one script."""
    return resources.files("swarm.store").joinpath(f"lua/{name}.lua").read_text("utf-8")


def register_scripts(client: redis.Redis) -> dict[str, Script]:
    """Every script, registered on ``client``."""
    return {name: client.register_script(script_text(name)) for name in SCRIPTS}
