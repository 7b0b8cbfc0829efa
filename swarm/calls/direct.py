"""A hosted call's HTTP request without the SDK's per-request work.

The openai SDK builds request options, merges headers, walks the HTTP client's connection
pool and cookie jar and wraps the response on every call: several times the CPU of the
request itself on a fast gateway. A ``DirectRoute`` sends the same request (the SDK
client's URL, headers and key, the same JSON body) over one keep-alive HTTP/1.1
connection per thread, with the standard library's ``http.client``, and raises the SDK's
own error types for every failure, so the retry policy, admission and the ledger see what
they see through the SDK:

    non-2xx          the SDK's status error for it (the client builds it: RateLimitError
                     with its Retry-After headers, InternalServerError, ...)
    read or connect  openai.APITimeoutError past the timeout (connect: the SDK client's
    timeout          connect timeout; each read and write: its read timeout, the node
                     timeout, as httpx applies it)
    no connection    openai.APIConnectionError (refused, reset, closed mid-answer)

A connection idle for ``IDLE_S`` or one the server closed (readable while idle) is
replaced before the request, as httpx's pool does; a request is never sent twice. A client
whose requests go through a proxy (HTTP(S)_PROXY / ALL_PROXY in the environment) or over
another scheme has no route: its calls go through the SDK (``DirectRoutes.send``).
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import select
import threading
import time
from dataclasses import dataclass

import httpx2
import openai

from swarm.calls.gateway import parse_answer, send
from swarm.calls.request import Answer, CallRequest

log = logging.getLogger(__name__)

IDLE_S = 30.0
"""A connection idle this long is closed instead of reused (the SDK client's keep-alive
expiry, swarm.calls.gateway.make_client)."""
PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy")
"""Environment variables (either case) that send the SDK's requests through a proxy."""


@dataclass
class _Held:
    """One thread's connection and when it last ended a request."""

    conn: http.client.HTTPConnection
    used_at: float


class DirectRoute:
    """POST ``/chat/completions`` of one SDK client, one keep-alive connection per thread."""

    def __init__(self, client: openai.OpenAI, verify_tls: bool = True) -> None:
        url = client.base_url
        self.client = client
        self.https = url.scheme == "https"
        self.host = url.host
        self.port = url.port or (443 if self.https else 80)
        self.url = f"{str(url).rstrip('/')}/chat/completions"
        self.path = f"{url.raw_path.decode().rstrip('/')}/chat/completions"
        merged = {**client.default_headers, **client.auth_headers}
        self.headers = {k: v for k, v in merged.items() if isinstance(v, str)}
        timeout = client.timeout
        self.connect_s, self.read_s = _timeouts(timeout)
        self._tls = httpx2.create_ssl_context(verify=verify_tls) if self.https else None
        self._local = threading.local()

    def post(self, request: CallRequest) -> Answer:
        """The request's answer; the SDK's errors as it raises them (see the module)."""
        payload = json.dumps(request.body()).encode()
        try:
            conn = self._connection()
            conn.request("POST", self.path, body=payload, headers=self.headers)
            response = conn.getresponse()
            content = response.read()
        except TimeoutError as exc:
            self._drop()
            raise openai.APITimeoutError(request=self._request(payload)) from exc
        except (OSError, http.client.HTTPException) as exc:
            self._drop()
            raise openai.APIConnectionError(request=self._request(payload)) from exc
        if response.will_close:
            self._drop()
        else:
            self._local.held.used_at = time.monotonic()
        headers = httpx2.Headers(response.getheaders())
        if not 200 <= response.status < 300:
            raw = httpx2.Response(
                response.status, headers=headers, content=content, request=self._request(payload)
            )
            raise self.client._make_status_error_from_response(raw)
        return parse_answer(content, headers)

    def _connection(self) -> http.client.HTTPConnection:
        """This thread's connection: kept while open and fresh, else a new one."""
        held: _Held | None = getattr(self._local, "held", None)
        if held is not None and held.conn.sock is not None and self._reusable(held):
            return held.conn
        self._drop()
        conn = self._connect()
        self._local.held = _Held(conn, time.monotonic())
        return conn

    def _reusable(self, held: _Held) -> bool:
        """Idle less than IDLE_S, and nothing to read on it (a server that closed it, or
        sent something unasked, makes it readable)."""
        if time.monotonic() - held.used_at >= IDLE_S or held.conn.sock is None:
            return False
        readable, _, _ = select.select([held.conn.sock], [], [], 0)
        return not readable

    def _connect(self) -> http.client.HTTPConnection:
        conn: http.client.HTTPConnection
        if self._tls is not None:
            conn = http.client.HTTPSConnection(
                self.host, self.port, timeout=self.connect_s, context=self._tls
            )
        else:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=self.connect_s)
        conn.connect()
        assert conn.sock is not None
        conn.sock.settimeout(self.read_s)
        return conn

    def _drop(self) -> None:
        held: _Held | None = getattr(self._local, "held", None)
        if held is not None:
            held.conn.close()
            self._local.held = None

    def _request(self, payload: bytes) -> httpx2.Request:
        """The request as the SDK's errors carry it."""
        return httpx2.Request("POST", self.url, headers=self.headers, content=payload)


def _timeouts(timeout: float | httpx2.Timeout | None) -> tuple[float | None, float | None]:
    """(connect, read) seconds of an SDK client's timeout."""
    if isinstance(timeout, httpx2.Timeout):
        return timeout.connect, timeout.read
    return timeout, timeout


def proxied(environ: dict[str, str] | os._Environ[str]) -> bool:
    """True when the environment sends HTTP requests through a proxy."""
    return any(environ.get(name) or environ.get(name.upper()) for name in PROXY_VARIABLES)


class DirectRoutes:
    """The direct route of each SDK client a process calls through (built on first use),
    or the SDK itself for a client that has none."""

    def __init__(self, verify_tls: bool = True, *, enabled: bool = True) -> None:
        self.verify_tls = verify_tls
        self.enabled = enabled and not proxied(os.environ)
        self._routes: dict[int, tuple[openai.OpenAI, DirectRoute | None]] = {}
        self._lock = threading.Lock()

    def route(self, client: openai.OpenAI) -> DirectRoute | None:
        """``client``'s route; None when its calls go through the SDK."""
        found = self._routes.get(id(client))
        if found is not None and found[0] is client:
            return found[1]
        with self._lock:
            route = None
            if self.enabled and client.base_url.scheme in ("http", "https"):
                route = DirectRoute(client, self.verify_tls)
            self._routes[id(client)] = (client, route)
        log.debug("swarm: calls to %s go %s", client.base_url,
                  "direct" if route else "through the SDK")  # fmt: skip
        return route

    def send(self, client: openai.OpenAI, request: CallRequest) -> Answer:
        """One chat completion through ``client``'s route (or the SDK)."""
        route = self.route(client)
        return route.post(request) if route is not None else send(client, request)
