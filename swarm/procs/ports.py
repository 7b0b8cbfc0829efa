"""Loopback ports and small HTTP probes for the processes we start.

Probes bypass any HTTP(S)_PROXY from the environment: they only ever talk to 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import json
import random
import socket
import urllib.error
import urllib.request
from typing import Any

LOOPBACK = "127.0.0.1"
REDIS_DEFAULT_PORT = 6379
"""The machine's own Redis listens here: never handed out as a free port."""
_HANDED_OUT: set[int] = set()
"""Ports free_port returned before (a few per started process; never reused by this process)."""
EPHEMERAL_RANGE = "/proc/sys/net/ipv4/ip_local_port_range"
LISTEN_LOW = 20000
"""Lowest port free_port picks (well above the usual services' ports: 5672, 6379, 15672)."""
LISTEN_TRIES = 50
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (never 6379).

    Ports come from below the kernel's ephemeral range (``ip_local_port_range``), at random:
    outgoing connections take their local ports from that range, so a server that restarts
    on its port (a Redis restart, a test proxy that cuts and heals) does not find it taken
    by some process's connection in between, and processes that start servers at the same
    time do not walk the same sequence. Where the range is unknown or leaves no room below
    it, the kernel picks (port 0).

    Another process can take the port between this probe and the child's bind; starters that
    pick the port themselves retry with a new one when the child's log says the address is
    in use. A port handed out once is never handed out again by this process: two replicas
    planned together (their metrics ports) once got the same one, and both scrapes read one
    worker.
    """
    low, high = listen_range()
    for _ in range(LISTEN_TRIES if high >= low else 0):
        port = random.randint(low, high)
        if _usable(port) and _bindable(port):
            _HANDED_OUT.add(port)
            return port
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((LOOPBACK, 0))
            port = int(sock.getsockname()[1])
        if _usable(port):
            _HANDED_OUT.add(port)
            return port


def listen_range(path: str = EPHEMERAL_RANGE) -> tuple[int, int]:
    """Ports free_port picks from: LISTEN_LOW up to just below the ephemeral range (an
    empty range, high < low, when that is unknown)."""
    try:
        with open(path, encoding="ascii") as f:
            ephemeral_low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return (1, 0)
    return (LISTEN_LOW, ephemeral_low - 1)


def _usable(port: int) -> bool:
    return port != REDIS_DEFAULT_PORT and port not in _HANDED_OUT


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((LOOPBACK, port))
        except OSError:
            return False
    return True


def port_open(port: int, timeout_s: float = 0.5) -> bool:
    """True when something accepts TCP connections on 127.0.0.1:``port``."""
    with contextlib.suppress(OSError), socket.create_connection((LOOPBACK, port), timeout_s):
        return True
    return False


def http_status(url: str, timeout_s: float = 2.0) -> int | None:
    """Status code of GET ``url``, or None when nothing answers."""
    try:
        with _NO_PROXY.open(url, timeout=timeout_s) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except (urllib.error.URLError, OSError):
        return None


def http_json(url: str, method: str = "GET", timeout_s: float = 10.0) -> dict[str, Any]:
    """GET or POST ``url`` and decode its JSON body (an empty body is ``{}``)."""
    request = urllib.request.Request(url, method=method)
    with _NO_PROXY.open(request, timeout=timeout_s) as resp:
        return json.loads(resp.read() or b"{}")  # type: ignore[no-any-return]
