"""The CPU one chat completion costs the calling process, per HTTP transport of the openai SDK.

Starts `swarm sim --latency-ms 0` (its own process, so its CPU is not counted) and sends
``--requests`` chat completions from ``--threads`` threads, the way a worker sends them
(swarm.calls.gateway.send: the SDK's ``client.post``), through one shared client per arm:

    httpx2 default   openai.DefaultHttpxClient with its default transport (httpcore2)
    urllib3          openai.DefaultHttpxClient(transport=Urllib3Transport(...)): an httpx2
                     transport on a urllib3 pool, the candidate for the workers' client
    lean urllib3     the least a urllib3 transport can do per request (LeanUrllib3Transport)
    libcurl          an httpx2 transport on pycurl (CurlTransport: libcurl does the HTTP in C,
                     one easy handle per thread keeps its connection), when pycurl is
                     installed (`pip install pycurl`; not a dependency of swarm)

Arms alternate for ``--rounds`` rounds after a warm-up; per arm, the median over rounds of
the process's CPU seconds (utime + stime) per request and of requests per second. Prints a
table and writes ops/bench/results/http_transport.md.

    python ops/bench/http_transport.py                       # 4,000 requests, 50 threads
    python ops/bench/http_transport.py --requests 1000 --threads 8 --rounds 5
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2
import openai
import urllib3

try:
    import pycurl
except ImportError:  # an optional arm
    pycurl = None

from swarm.bench import procs

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "ops" / "bench" / "results" / "http_transport.md"
BODY = {"model": "kimi-k2.5", "messages": [{"role": "user", "content": "hello"}],
        "max_tokens": 64}  # fmt: skip
TIMEOUT = httpx2.Timeout(30.0, connect=5.0)

CHUNK_BYTES = 65536
"""The most a streamed body's read returns at once."""


class Urllib3Transport(httpx2.BaseTransport):
    """httpx2 requests on urllib3 keep-alive connections, ``pool_size`` per origin, with the
    request's connect/read/pool timeouts and streamed bodies (the candidate measured)."""

    def __init__(self, pool_size: int, verify: bool = True) -> None:
        self._pools = urllib3.PoolManager(
            num_pools=16,
            maxsize=pool_size,
            block=True,
            retries=False,
            ssl_context=httpx2.create_ssl_context(verify=verify),
        )

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        url = request.url
        timeouts: dict[str, float | None] = request.extensions.get("timeout", {})
        headers = urllib3.HTTPHeaderDict()
        for name, value in request.headers.multi_items():
            headers.add(name, value)
        pool = self._pools.connection_from_host(url.host, url.port, url.scheme)
        response = pool.urlopen(
            request.method,
            url.raw_path.decode("ascii"),
            body=request.read() or None,
            headers=headers,
            retries=False,
            redirect=False,
            assert_same_host=False,
            timeout=urllib3.Timeout(connect=timeouts.get("connect"),
                                    read=timeouts.get("read")),
            pool_timeout=timeouts.get("pool"),
            preload_content=False,
            decode_content=False,
        )  # fmt: skip
        return httpx2.Response(
            response.status,
            headers=list(response.headers.items()),
            stream=_Body(response),
            extensions={
                "http_version": b"HTTP/1.1",
                "reason_phrase": (response.reason or "").encode("ascii", "ignore"),
            },
        )

    def close(self) -> None:
        self._pools.clear()


class _Body(httpx2.SyncByteStream):
    """A response body read from its urllib3 response; its connection goes back to the pool
    once the body is read to the end, and is closed when the body is left unread."""

    def __init__(self, response: urllib3.BaseHTTPResponse) -> None:
        self._response = response
        self._read = False

    def __iter__(self) -> Iterator[bytes]:
        yield from self._response.stream(CHUNK_BYTES, decode_content=False)
        self._read = True

    def close(self) -> None:
        if not self._read:
            self._response.close()
        self._response.release_conn()


class LeanUrllib3Transport(httpx2.BaseTransport):
    """The least urllib3 can do per request (the best case): one cached pool, headers as a
    dict, the whole body read at once, no timeouts; not usable for streamed answers."""

    def __init__(self, pool_size: int) -> None:
        self._size = pool_size
        self._pool: urllib3.HTTPConnectionPool | None = None

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        if self._pool is None:
            self._pool = urllib3.HTTPConnectionPool(request.url.host, request.url.port,
                                                    maxsize=self._size, block=True)  # fmt: skip
        response = self._pool.urlopen(
            request.method, request.url.raw_path.decode("ascii"), body=request.read(),
            headers=dict(request.headers.items()), retries=False, redirect=False,
            assert_same_host=False, decode_content=False,
        )  # fmt: skip
        return httpx2.Response(response.status, headers=list(response.headers.items()),
                               content=response.data)  # fmt: skip


class CurlTransport(httpx2.BaseTransport):
    """httpx2 requests on libcurl (pycurl), one easy handle per thread: the handle keeps its
    connection alive between requests. The whole body is read at once; the request's read
    and connect timeouts bound the transfer (libcurl has a total timeout, not a per-read
    one). A bench arm, to measure what HTTP done in C saves under the SDK."""

    def __init__(self) -> None:
        self._local = threading.local()

    def _handle(self) -> Any:
        handle = getattr(self._local, "handle", None)
        if handle is None:
            handle = self._local.handle = pycurl.Curl()
            handle.setopt(pycurl.NOSIGNAL, 1)
        return handle

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        handle = self._handle()
        timeouts: dict[str, float | None] = request.extensions.get("timeout", {})
        body, lines = io.BytesIO(), list[bytes]()
        handle.setopt(pycurl.URL, str(request.url))
        handle.setopt(pycurl.HTTPHEADER, [f"{k}: {v}" for k, v in request.headers.items()
                                          if k not in ("host", "content-length")])  # fmt: skip
        handle.setopt(pycurl.POSTFIELDS, request.read())
        handle.setopt(pycurl.CONNECTTIMEOUT_MS, int((timeouts.get("connect") or 5.0) * 1000))
        handle.setopt(pycurl.TIMEOUT_MS, int((timeouts.get("read") or 30.0) * 1000))
        handle.setopt(pycurl.WRITEDATA, body)
        handle.setopt(pycurl.HEADERFUNCTION, lines.append)
        handle.perform()
        headers = [_header(line) for line in lines[1:] if b":" in line]
        return httpx2.Response(handle.getinfo(pycurl.RESPONSE_CODE), headers=headers,
                               content=body.getvalue())  # fmt: skip


def _header(line: bytes) -> tuple[str, str]:
    name, _, value = line.decode("latin-1").partition(":")
    return name, value.strip()


def curl_client(base_url: str, threads: int) -> openai.OpenAI:
    http = openai.DefaultHttpxClient(timeout=TIMEOUT, transport=CurlTransport())
    return openai.OpenAI(base_url=base_url, api_key="k", max_retries=0, http_client=http)


def default_client(base_url: str, threads: int) -> openai.OpenAI:
    limits = httpx2.Limits(max_connections=threads, max_keepalive_connections=threads,
                           keepalive_expiry=30.0)  # fmt: skip
    http = openai.DefaultHttpxClient(timeout=TIMEOUT, limits=limits)
    return openai.OpenAI(base_url=base_url, api_key="k", max_retries=0, http_client=http)


def urllib3_client(base_url: str, threads: int) -> openai.OpenAI:
    http = openai.DefaultHttpxClient(timeout=TIMEOUT, transport=Urllib3Transport(threads))
    return openai.OpenAI(base_url=base_url, api_key="k", max_retries=0, http_client=http)


def lean_client(base_url: str, threads: int) -> openai.OpenAI:
    http = openai.DefaultHttpxClient(timeout=TIMEOUT, transport=LeanUrllib3Transport(threads))
    return openai.OpenAI(base_url=base_url, api_key="k", max_retries=0, http_client=http)


ARMS: dict[str, Callable[[str, int], openai.OpenAI]] = {
    "httpx2 default (httpcore2)": default_client,
    "urllib3 transport": urllib3_client,
    "lean urllib3 (best case)": lean_client,
}
if pycurl is not None:
    ARMS["libcurl (pycurl)"] = curl_client


def run(client: openai.OpenAI, requests: int, threads: int) -> tuple[float, float]:
    """CPU seconds per request and requests per second of ``requests`` over ``threads``."""
    left = iter(range(requests))
    lock = threading.Lock()

    def worker() -> None:
        while True:
            with lock:
                if next(left, None) is None:
                    return
            response = client.post("/chat/completions", body=BODY, cast_to=httpx2.Response)
            response.json()

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    cpu, wall = _cpu(), time.perf_counter()
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    return (_cpu() - cpu) / requests, requests / (time.perf_counter() - wall)


def _cpu() -> float:
    times = os.times()
    return times.user + times.system


def measure(base_url: str, args: argparse.Namespace) -> dict[str, list[tuple[float, float]]]:
    clients = {name: make(base_url, args.threads) for name, make in ARMS.items()}
    for client in clients.values():
        run(client, min(args.requests, 500), args.threads)  # warm-up: connections, imports
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in clients}
    for _ in range(args.rounds):
        for name, client in clients.items():
            runs[name].append(run(client, args.requests, args.threads))
    return runs


def table(runs: dict[str, list[tuple[float, float]]], args: argparse.Namespace) -> str:
    load = os.getloadavg()[0]
    at = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [
        f"`python ops/bench/http_transport.py --requests {args.requests} --threads "
        f"{args.threads} --rounds {args.rounds}` at {at}, "
        f"{os.cpu_count()} cores, load average {load:.1f}",
        "",
        "| transport | CPU ms/request (median) | rounds (CPU ms/request) | requests/s (median) |",
        "|---|---:|---|---:|",
    ]
    medians = {}
    for name, results in runs.items():
        cpu = [c * 1000 for c, _ in results]
        medians[name] = statistics.median(cpu)
        rates = statistics.median(r for _, r in results)
        rounds = ", ".join(f"{c:.3f}" for c in cpu)
        lines.append(f"| {name} | {medians[name]:.3f} | {rounds} | {rates:.0f} |")
    base = next(iter(medians.values()))
    lines.append("")
    for name, median in list(medians.items())[1:]:
        lines.append(f"{name} / httpx2 default, CPU per request: {median / base:.2f}")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--threads", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory() as folder,
        procs.sim(Path(folder), ["--latency-ms", "0"]) as sim,
    ):
        runs = measure(sim.base_url, args)
    text = table(runs, args)
    print(text)
    OUT.write_text(text)


if __name__ == "__main__":
    main()
