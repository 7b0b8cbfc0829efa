"""One loader for every Lua script of the project (job store and admission).

A script ships as ``<package>/lua/<name>.lua`` and documents its arguments in its header,
one line each::

    -- KEYS[1] budget: hash of cap_nusd, spent_nusd, ...
    -- ARGV[1] reservation_id
    -- ARGV[5..] limits: groups of 4 (name, limit, window ms, burst)

Each script has one typed argument record (a ``ScriptArgs`` subclass) whose fields are
those names in that order; ``ScriptArgs.argv`` flattens a variadic tail (``[n..]``). A test
holds every record to its script's header, so the two cannot drift apart.

Scripts run atomically on the Redis server; redis-py's Script calls them by SHA and loads
them again after a SCRIPT FLUSH or a server restart. In a pipeline a script goes as EVAL
with its text (the lease scripts pipelined are under a kilobyte): redis-py's Script there
first asks SCRIPT EXISTS for the pipeline's scripts on every execute, a round trip of its
own. A larger script that rides in another module's pipeline (swarm.store.companion) goes
as EVALSHA with ``Scripts.queue`` instead, and runs again alone should Redis not know it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from typing import Any, ClassVar

import redis
from redis.commands.core import Script
from redis.exceptions import NoScriptError


def script_text(package: str, name: str) -> str:
    """Source of ``<package>/lua/<name>.lua``."""
    return resources.files(package).joinpath(f"lua/{name}.lua").read_text("utf-8")


@dataclass(frozen=True)
class ScriptArgs:
    """Base of the typed argument records: subclasses name their script and list KEYS
    fields first, then ARGV fields, in the header's order."""

    PACKAGE: ClassVar[str]
    SCRIPT: ClassVar[str]
    KEYS: ClassVar[int]
    """How many of the fields (the first ones) are keys."""

    @classmethod
    def names(cls) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(key field names, argv field names), read once per record class."""
        return _names(cls)

    def keys(self) -> list[str]:
        """KEYS, in order; a tuple field (a variadic ``KEYS[n..]``) is flattened."""
        return self._values(self.names()[0])

    def argv(self) -> list[Any]:
        """ARGV, in order; a tuple field (the variadic tail) is flattened."""
        return self._values(self.names()[1])

    def _values(self, names: tuple[str, ...]) -> list[Any]:
        values: list[Any] = []
        for name in names:
            value = getattr(self, name)
            values.extend(_flat(value) if isinstance(value, tuple) else [value])
        return values


_NAMES: dict[type[ScriptArgs], tuple[tuple[str, ...], tuple[str, ...]]] = {}


def _names(record: type[ScriptArgs]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    found = _NAMES.get(record)
    if found is None:
        names = tuple(f.name for f in dataclasses.fields(record))
        found = _NAMES[record] = names[: record.KEYS], names[record.KEYS :]
    return found


def _flat(values: Iterable[Any]) -> list[Any]:
    out: list[Any] = []
    for value in values:
        out.extend(_flat(value) if isinstance(value, tuple) else [value])
    return out


class Scripts:
    """The scripts of some argument records, registered on one client."""

    def __init__(self, client: redis.Redis, *records: type[ScriptArgs]) -> None:
        self._scripts: dict[type[ScriptArgs], Script] = {
            record: client.register_script(script_text(record.PACKAGE, record.SCRIPT))
            for record in records
        }

    def run(self, args: ScriptArgs, client: Any = None) -> Any:
        """Run the script of ``args`` with its keys and values (on ``client``, a pipeline,
        instead of the registered one: queued as EVAL, its result in the pipeline's)."""
        script = self._scripts[type(args)]
        keys = args.keys()
        if client is None:
            return script(keys=keys, args=args.argv())
        return client.eval(script.script, len(keys), *keys, *args.argv())

    def queue(self, args: ScriptArgs, pipe: Any) -> None:
        """Queue the script of ``args`` on ``pipe`` by its SHA (EVALSHA: no text sent, no
        SCRIPT EXISTS asked); ``reply`` reads what it answered."""
        keys = args.keys()
        pipe.evalsha(self._scripts[type(args)].sha, len(keys), *keys, *args.argv())

    def reply(self, args: ScriptArgs, reply: Any) -> Any:
        """The answer of a script ``queue`` sent: when Redis did not know the script (a
        SCRIPT FLUSH or a restart: NOSCRIPT), it runs again alone, loaded first."""
        if isinstance(reply, NoScriptError):
            return self.run(args)
        if isinstance(reply, Exception):
            raise reply
        return reply
