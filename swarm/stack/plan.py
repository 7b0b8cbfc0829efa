"""Turn compose services into local processes: the same commands and environment, with the
in-network addresses rewritten to 127.0.0.1 and a free (or given) port per listening service.

A service listens on the port its command names with ``--port`` (redis-server, ``celery
flower`` and ``swarm sim`` all take it). ``redis:6379`` in any URL of any service becomes
``127.0.0.1:<its local port>``; ``0.0.0.0`` binds become ``127.0.0.1``. Celery workers get a
node name per replica (``worker-fast-2@host``) and, when SWARM_METRICS_PORT is set, a free
metrics port each, since local replicas share one address.
"""

from __future__ import annotations

import re
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from graphlib import CycleError, TopologicalSorter
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from swarm.errors import ConfigError
from swarm.procs import LOOPBACK, free_port
from swarm.stack.compose import ComposeFile, Service

Ready = Literal["port", "celery", "none"]
METRICS_ENV = "SWARM_METRICS_PORT"
_PORT_FLAGS = ("--port",)
_BIND_FLAGS = ("--host", "--address", "--bind")
_ANY_ADDRESS = {"0.0.0.0", "::", "*"}
_URL_HOST = re.compile(r"(?<=[/@])([A-Za-z0-9][A-Za-z0-9_.-]*):(\d+)")
Rewrite = Callable[[str, str], str]
"""(text, where it comes from) -> text with in-network addresses made local."""


class LocalProcess(BaseModel):
    """One process of the local stack."""

    model_config = ConfigDict(frozen=True)

    name: str
    """``<service>-<replica>``; also the log file's name."""
    service: str
    """The compose service it runs."""
    wave: int
    """Start order: every process of wave n starts after wave n-1 is ready."""
    argv: tuple[str, ...]
    """The command, programs resolved to this machine's."""
    env: dict[str, str]
    """The service's environment (merged over the caller's at start)."""
    port: int | None = None
    """Local port the service listens on, if any."""
    metrics_port: int | None = None
    """Local Prometheus port of a worker, if any."""
    ready: Ready = "none"
    """How to tell it is up: its port accepts connections, or Celery logged ``ready.``."""
    stop_signal: str = "SIGTERM"
    """Signal that stops it."""
    stop_grace_s: float = 10.0
    """Seconds before SIGKILL."""


def selected(compose: ComposeFile, profiles: Sequence[str]) -> list[Service]:
    """The services that start with ``profiles`` enabled (compose's rule)."""
    return [s for s in compose.services.values() if not s.profiles or set(s.profiles) & {*profiles}]


def waves(services: Sequence[Service]) -> list[list[Service]]:
    """Services grouped by ``depends_on`` level (dependencies on unselected services ignored)."""
    names = {s.name: s for s in services}
    sorter = TopologicalSorter({s.name: [d for d in s.depends_on if d in names] for s in services})
    try:
        sorter.prepare()
    except CycleError as exc:
        raise ConfigError(f"depends_on has a cycle: {exc.args[1]}") from None
    out = []
    while sorter.is_active():
        ready = sorted(sorter.get_ready(), key=list(names).index)
        out.append([names[n] for n in ready])
        sorter.done(*ready)
    return out


def plan(
    compose: ComposeFile,
    run_dir: Path,
    *,
    profiles: Sequence[str] = (),
    replicas: Mapping[str, int] | None = None,
    ports: Mapping[str, int] | None = None,
) -> list[LocalProcess]:
    """The local processes of ``compose`` in start order."""
    services = selected(compose, profiles)
    _check_names(compose, {s.name for s in services}, {**(replicas or {}), **(ports or {})})
    hosts = _listen_ports(services, ports or {})
    rewrite = _host_rewriter(compose, hosts)
    out = []
    for wave, group in enumerate(waves(services)):
        for service in group:
            count = (replicas or {}).get(service.name, service.replicas)
            for replica in range(1, count + 1):
                out.append(_process(service, wave, replica, rewrite, hosts, run_dir))
    return out


def _check_names(compose: ComposeFile, running: set[str], named: Mapping[str, int]) -> None:
    for name, value in named.items():
        if name not in compose.services:
            raise ConfigError(f"no service {name!r} in {compose.path.name}")
        if name not in running:
            raise ConfigError(f"service {name!r} is in a profile that is not enabled")
        if value < 0:
            raise ConfigError(f"{name}: {value} is not a valid count or port")


def _listen_ports(
    services: Sequence[Service], given: Mapping[str, int]
) -> dict[str, tuple[int, int]]:
    """service -> (port in its command, local port)."""
    out = {}
    for service in services:
        port = _flag_value(service.command, _PORT_FLAGS)
        if port is not None and port.isdigit():
            out[service.name] = (int(port), given.get(service.name) or free_port())
    return out


def _host_rewriter(compose: ComposeFile, hosts: Mapping[str, tuple[int, int]]) -> Rewrite:
    def rewrite(text: str, where: str) -> str:
        def sub(match: re.Match[str]) -> str:
            name, port = match[1], int(match[2])
            if name in hosts and hosts[name][0] == port:
                return f"{LOOPBACK}:{hosts[name][1]}"
            if name in compose.services:
                raise ConfigError(
                    f"{where} points at service {name!r}, which is not started here "
                    f"(enable its profile, e.g. --with-sim, or point it elsewhere)"
                )
            return match[0]

        return _URL_HOST.sub(sub, text)

    return rewrite


def _process(
    service: Service,
    wave: int,
    replica: int,
    rewrite: Rewrite,
    hosts: Mapping[str, tuple[int, int]],
    run_dir: Path,
) -> LocalProcess:
    name = f"{service.name}-{replica}"
    env = {k: rewrite(v, f"{service.name}: {k}") for k, v in service.environment.items()}
    argv = [rewrite(a, f"{service.name}: command") for a in service.command]
    port = hosts.get(service.name, (0, None))[1]
    argv = _local_listen(argv, port)
    worker = _is_celery_worker(argv)
    metrics_port = None
    if worker:
        argv = _node_name(argv, name)
        if env.get(METRICS_ENV, "0") not in ("", "0"):
            metrics_port = free_port()
            env[METRICS_ENV] = str(metrics_port)
    if argv and argv[0] == "redis-server":
        data = run_dir / "data" / service.name
        data.mkdir(parents=True, exist_ok=True)
        argv += ["--bind", LOOPBACK, "--dir", str(data.resolve())]
    return LocalProcess(
        name=name,
        service=service.name,
        wave=wave,
        argv=tuple(resolve_program(argv)),
        env=env,
        port=port,
        metrics_port=metrics_port,
        ready="port" if port else ("celery" if worker else "none"),
        stop_signal=service.stop_signal,
        stop_grace_s=service.stop_grace_s,
    )


def _flag_value(argv: Sequence[str], flags: Sequence[str]) -> str | None:
    for i, arg in enumerate(argv):
        for flag in flags:
            if arg == flag and i + 1 < len(argv):
                return argv[i + 1]
            if arg.startswith(flag + "="):
                return arg.split("=", 1)[1]
    return None


def _local_listen(argv: list[str], port: int | None) -> list[str]:
    """Own ``--port`` -> the local port; ``--host/--address/--bind 0.0.0.0`` -> 127.0.0.1."""
    out = list(argv)
    for i, arg in enumerate(out):
        flag, eq, value = arg.partition("=")
        if not eq:
            value = out[i + 1] if i + 1 < len(out) else ""
        if flag in _PORT_FLAGS and port:
            new = str(port)
        elif flag in _BIND_FLAGS and value in _ANY_ADDRESS:
            new = LOOPBACK
        else:
            continue
        if eq:
            out[i] = f"{flag}={new}"
        elif i + 1 < len(out):
            out[i + 1] = new
    return out


def _is_celery_worker(argv: Sequence[str]) -> bool:
    return bool(argv) and Path(argv[0]).name == "celery" and "worker" in argv


def _node_name(argv: list[str], name: str) -> list[str]:
    """``-n svc@%h`` -> ``-n svc-<replica>@%h``: local replicas share one host name."""
    out = list(argv)
    for i, arg in enumerate(out):
        if arg in ("-n", "--hostname") and i + 1 < len(out):
            out[i + 1] = f"{name}@%h"
            return out
    return [*out, "-n", f"{name}@%h"]


def resolve_program(argv: list[str]) -> list[str]:
    """``celery``/``swarm`` from this interpreter's environment first, then PATH."""
    if not argv:
        raise ConfigError("a service has no command")
    program = argv[0]
    beside = Path(sys.executable).parent / program
    found = str(beside) if beside.is_file() else shutil.which(program)
    if found is None:
        raise ConfigError(f"{program} is not installed (needed by the local stack)")
    return [found, *argv[1:]]
