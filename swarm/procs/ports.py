"""Loopback ports and small HTTP probes for the processes we start.

Probes bypass any HTTP(S)_PROXY from the environment: they only ever talk to 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import json
import socket
import urllib.error
import urllib.request
from typing import Any

LOOPBACK = "127.0.0.1"
REDIS_DEFAULT_PORT = 6379
"""The machine's own Redis listens here: never handed out as a free port."""
_HANDED_OUT: set[int] = set()
"""Ports free_port returned before (a few per started process; never reused by this process)."""
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (never 6379).

    Another process can take it between this probe and the child's bind; starters that pick
    the port themselves retry with a new one when the child's log says the address is in use.
    The kernel may offer a port it offered a moment ago (nothing is bound to it yet), so a
    port handed out once is never handed out again by this process: two replicas planned
    together (their metrics ports) once got the same one, and both scrapes read one worker.
    """
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((LOOPBACK, 0))
            port = int(sock.getsockname()[1])
        if port != REDIS_DEFAULT_PORT and port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port


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
