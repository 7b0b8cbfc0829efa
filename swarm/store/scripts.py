"""One loader for every Lua script of the project (job store and admission).

A script ships as ``<package>/lua/<name>.lua`` and documents its arguments in its header,
one line each::

    -- KEYS[1] budget: hash of cap_nusd, spent_nusd, ...
    -- ARGV[1] reservation_id
    -- ARGV[5..] limits: groups of 4 (name, limit, window ms, burst)

Each script has one typed argument record (a ``ScriptArgs`` subclass) whose fields are
those names in that order; ``ScriptArgs.argv`` flattens a variadic tail (``[n..]``) and a
``ScriptPart`` field (a group of keys or values several scripts take together, listed
field by field in their headers). A test holds every record to its script's header, so the two
cannot drift apart.

What several scripts do alike lives once, in a prelude ``<package>/lua/lib/<name>.lua`` of
``local function``s: a record names the preludes its script calls (``PRELUDES``) and
``source`` puts them before the script's own text.

Scripts run atomically on the Redis server; redis-py's Script calls them by SHA and loads
them again after a SCRIPT FLUSH or a server restart. In a pipeline a script goes as EVAL
with its text (the lease scripts pipelined are under a kilobyte): redis-py's Script there
first asks SCRIPT EXISTS for the pipeline's scripts on every execute, a round trip of its
own. A larger script that rides in another module's pipeline (swarm.store.companion) goes
as EVALSHA with ``Scripts.queue`` instead, and runs again alone should Redis not know it.
"""

from __future__ import annotations

import dataclasses
import typing
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


def source(record: type[ScriptArgs]) -> str:
    """The script ``record`` runs: its preludes (``lua/lib/<name>.lua``), then its own text."""
    parts = [script_text(record.PACKAGE, f"lib/{name}") for name in record.PRELUDES]
    return "\n".join([*parts, script_text(record.PACKAGE, record.SCRIPT)])


@dataclass(frozen=True)
class ScriptPart:
    """Base of a group of KEYS or ARGV values several scripts take together, in its fields'
    order (a prelude function reads them from where the group starts)."""


@dataclass(frozen=True)
class ScriptArgs:
    """Base of the typed argument records: subclasses name their script and list KEYS
    fields first, then ARGV fields, in the header's order."""

    PACKAGE: ClassVar[str]
    SCRIPT: ClassVar[str]
    KEYS: ClassVar[int]
    """How many of the fields (the first ones) are keys."""
    PRELUDES: ClassVar[tuple[str, ...]] = ()
    """The preludes the script calls, in the order they go before it."""

    @classmethod
    def names(cls) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(key names, argv names) as the script's header lists them (a ScriptPart field's
        own names in its place), read once per record class."""
        keys, argv = _fields(cls)
        return _expanded(keys), _expanded(argv)

    def keys(self) -> list[str]:
        """KEYS, in order; a tuple field (a variadic ``KEYS[n..]``) and a ScriptPart are
        flattened."""
        return _flat(getattr(self, name) for name, _ in _fields(type(self))[0])

    def argv(self) -> list[Any]:
        """ARGV, in order; a tuple field (the variadic tail) and a ScriptPart are flattened."""
        return _flat(getattr(self, name) for name, _ in _fields(type(self))[1])


_Field = tuple[str, Any]
"""A record's field: its name and type."""
_FIELDS: dict[type[ScriptArgs], tuple[tuple[_Field, ...], tuple[_Field, ...]]] = {}


def _fields(record: type[ScriptArgs]) -> tuple[tuple[_Field, ...], tuple[_Field, ...]]:
    """(key fields, argv fields) of ``record``, read once per record class."""
    found = _FIELDS.get(record)
    if found is None:
        hints = typing.get_type_hints(record)
        fields = tuple((f.name, hints[f.name]) for f in dataclasses.fields(record))
        found = _FIELDS[record] = fields[: record.KEYS], fields[record.KEYS :]
    return found


def _expanded(fields: tuple[_Field, ...]) -> tuple[str, ...]:
    """The names of ``fields``, a ScriptPart's own in its place."""
    names: list[str] = []
    for name, kind in fields:
        if isinstance(kind, type) and issubclass(kind, ScriptPart):
            names.extend(f.name for f in dataclasses.fields(kind))
        else:
            names.append(name)
    return tuple(names)


def _flat(values: Iterable[Any]) -> list[Any]:
    out: list[Any] = []
    for value in values:
        if isinstance(value, ScriptPart):
            value = tuple(getattr(value, f.name) for f in dataclasses.fields(value))
        out.extend(_flat(value) if isinstance(value, tuple) else [value])
    return out


class Scripts:
    """The scripts of some argument records, registered on one client."""

    def __init__(self, client: redis.Redis, *records: type[ScriptArgs]) -> None:
        self._scripts: dict[type[ScriptArgs], Script] = {
            record: client.register_script(source(record)) for record in records
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
