"""Read docker-compose.yml the way ``docker compose`` does, for the parts the local stack needs.

PyYAML parses the file (anchors and ``<<`` merge keys included); python-dotenv reads ``.env``.
Compose's ``${VAR}`` interpolation is hand-written here because no maintained Python library
implements it: the forms are ``$$`` (a literal ``$``), ``${VAR}``, ``${VAR:-default}``,
``${VAR-default}``, ``${VAR:?message}`` and ``${VAR?message}`` (no nesting inside a default);
variables exported in the shell win over ``.env``, as in compose.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from dotenv import dotenv_values
from pydantic import BaseModel, ConfigDict

from swarm.errors import ConfigError

_VAR = re.compile(
    r"\$(?:(?P<escaped>\$)|\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\})"
)
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|us|s|m|h)")
_DURATION_S = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
COMPOSE_DEFAULT_GRACE_S = 10.0


class Service(BaseModel):
    """One service of the compose file, interpolated."""

    model_config = ConfigDict(frozen=True)

    name: str
    """The service's key under ``services:``."""
    command: tuple[str, ...]
    """Its command as an argv (a string command is split like a shell would)."""
    environment: dict[str, str]
    """Its ``environment:`` (values interpolated; a bare ``KEY`` takes the shell's value)."""
    profiles: tuple[str, ...] = ()
    """Compose profiles; an empty tuple means the service always starts."""
    depends_on: tuple[str, ...] = ()
    """Services that must be up first."""
    stop_signal: str = "SIGTERM"
    """Signal that stops it (compose ``stop_signal``)."""
    stop_grace_s: float = COMPOSE_DEFAULT_GRACE_S
    """Seconds between the stop signal and SIGKILL (compose ``stop_grace_period``)."""
    replicas: int = 1
    """``deploy.replicas``, or 1."""
    raw: dict[str, Any]
    """The service's interpolated definition as written, for checks."""


class ComposeFile(BaseModel):
    """The services of a compose file and the variables it uses."""

    model_config = ConfigDict(frozen=True)

    path: Path
    """Where it was read from."""
    services: dict[str, Service]
    """Services by name, in file order."""
    variables: frozenset[str]
    """Every ``${VAR}`` name the file uses."""


def variables_in(text: str) -> set[str]:
    """Names of the ``${VAR}`` references in ``text`` (``$$`` escapes excluded)."""
    return {m["name"] for m in _VAR.finditer(text) if m["name"]}


def interpolate(text: str, env: Mapping[str, str]) -> str:
    """Compose interpolation of one string; ConfigError for a ``${VAR:?message}`` unset."""

    def sub(match: re.Match[str]) -> str:
        if match["escaped"]:
            return "$"
        name, op, arg = match["name"], match["op"] or "", match["arg"] or ""
        value = env.get(name)
        missing = value is None or (op.startswith(":") and value == "")
        if op.endswith("?") and missing:
            raise ConfigError(f"compose variable {name}: {arg or 'required but not set'}")
        if op.endswith("-") and missing:
            return interpolate(arg, env)
        return value or ""

    return _VAR.sub(sub, text)


def load_env(env_file: Path | None, environ: Mapping[str, str]) -> dict[str, str]:
    """The interpolation environment: ``env_file`` (if it exists) under the shell's variables."""
    values: dict[str, str] = {}
    if env_file is not None and env_file.is_file():
        values = {k: v for k, v in dotenv_values(env_file).items() if v is not None}
    return {**values, **environ}


def load_compose(path: Path, env: Mapping[str, str]) -> ComposeFile:
    """Parse and interpolate ``path``; ConfigError when it is not a compose file."""
    try:
        text = path.read_text(encoding="utf-8")
        doc = yaml.safe_load(text)
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("services"), dict):
        raise ConfigError(f"{path}: no `services:` mapping")
    services = {
        name: _service(str(name), _interpolated(spec, env), env)
        for name, spec in doc["services"].items()
    }
    return ComposeFile(path=path, services=services, variables=frozenset(_variables(doc)))


def _variables(value: Any) -> set[str]:
    if isinstance(value, str):
        return variables_in(value)
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        return set().union(*(_variables(v) for v in value))
    return set()


def _interpolated(value: Any, env: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return interpolate(value, env)
    if isinstance(value, list):
        return [_interpolated(v, env) for v in value]
    if isinstance(value, dict):
        return {k: _interpolated(v, env) for k, v in value.items()}
    return value


def _service(name: str, spec: dict[str, Any], env: Mapping[str, str]) -> Service:
    command = spec.get("command") or []
    argv = shlex.split(command) if isinstance(command, str) else [str(a) for a in command]
    depends = spec.get("depends_on") or []
    deploy = spec.get("deploy") or {}
    return Service(
        name=name,
        command=tuple(argv),
        environment=_environment(spec.get("environment"), env),
        profiles=tuple(spec.get("profiles") or ()),
        depends_on=tuple(depends),
        stop_signal=str(spec.get("stop_signal") or "SIGTERM"),
        stop_grace_s=parse_duration_s(spec.get("stop_grace_period")),
        replicas=int(deploy.get("replicas", 1)),
        raw=spec,
    )


def _environment(value: Any, env: Mapping[str, str]) -> dict[str, str]:
    if value is None:
        return {}
    if isinstance(value, list):
        pairs = [str(item).partition("=") for item in value]
        value = {k: (v if sep else None) for k, sep, v in pairs}
    out: dict[str, str] = {}
    for key, val in value.items():
        if val is None:
            if key in env:
                out[key] = env[key]
        else:
            out[key] = str(val).lower() if isinstance(val, bool) else str(val)
    return out


def parse_duration_s(value: Any) -> float:
    """Seconds of a compose duration (``60s``, ``1m30s``, ``500ms``); None means 10 s."""
    if value is None:
        return COMPOSE_DEFAULT_GRACE_S
    if isinstance(value, int | float):
        return float(value)
    text = str(value).strip()
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ConfigError(f"not a compose duration: {value!r}")
    return sum(float(n) * _DURATION_S[u] for n, u in parts)
