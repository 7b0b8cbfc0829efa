"""The direct route: the SDK's request and the SDK's errors, on one connection per thread."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import openai
import pytest
from doubles import job_spec

from swarm.calls.direct import DirectRoute, DirectRoutes, proxied
from swarm.calls.pipeline import run_call
from swarm.calls.request import CallRequest
from swarm.calls.retry_policy import classify, parse_retry_after
from swarm.calls.runtime import Runtime
from swarm.catalog import load_catalog
from swarm.records import ErrorKind
from swarm.settings import Settings
from swarm.store import MemoryJobStore

SPEC = load_catalog(None).model("kimi-k2.5")
REQUEST = CallRequest.of("j", "n0", SPEC, [{"role": "user", "content": "hi"}], 64)
Reply = Callable[[dict[str, Any]], tuple[int, dict[str, str], bytes]]


def answer(content: str = "ok") -> tuple[int, dict[str, str], bytes]:
    body = {
        "choices": [{"message": {"content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 7, "completion_tokens": 3},
    }
    return 200, {"Content-Type": "application/json"}, json.dumps(body).encode()


class Gateway:
    """A local HTTP/1.1 server answering with ``reply``; records bodies, headers, peers."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.peers: list[tuple[str, int]] = []
        gateway = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                gateway.bodies.append(body)
                gateway.headers.append(dict(self.headers))
                gateway.peers.append(self.client_address)
                status, headers, content = gateway.reply(body)
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(content)))
                self.end_headers()
                self.wfile.write(content)

            def log_message(self, *args: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            def handle_error(self, request: Any, client_address: Any) -> None:
                pass  # a client that timed out and closed: the late write fails

        self.server = Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def client(self, **options: Any) -> openai.OpenAI:
        port = self.server.server_address[1]
        return openai.OpenAI(
            base_url=f"http://127.0.0.1:{port}/v1", api_key="k-1", max_retries=0, **options
        )


@pytest.fixture
def serve() -> Iterator[Callable[[Reply], Gateway]]:
    started: list[Gateway] = []

    def start(reply: Reply) -> Gateway:
        started.append(Gateway(reply))
        return started[-1]

    yield start
    for gateway in started:
        gateway.server.shutdown()
        gateway.server.server_close()


def test_sends_the_sdks_request_and_parses_the_answer(serve: Any) -> None:
    gateway = serve(lambda body: answer("fine"))
    result = DirectRoute(gateway.client()).post(REQUEST)
    assert result.content == "fine"
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (7, 3)
    assert gateway.bodies == [REQUEST.body()]
    sent = {k.lower(): v for k, v in gateway.headers[0].items()}
    assert sent["authorization"] == "Bearer k-1"
    assert sent["content-type"] == "application/json"
    assert sent["user-agent"].startswith("OpenAI/Python")


def test_one_connection_per_thread_is_kept_alive(serve: Any) -> None:
    gateway = serve(lambda body: answer())
    route = DirectRoute(gateway.client())
    for _ in range(3):
        route.post(REQUEST)
    other = threading.Thread(target=route.post, args=(REQUEST,))
    other.start()
    other.join()
    assert len(gateway.peers) == 4
    assert len(set(gateway.peers[:3])) == 1  # one connection for the first thread's calls
    assert gateway.peers[3] != gateway.peers[0]  # the other thread has its own


def test_a_connection_the_server_closed_is_replaced(serve: Any) -> None:
    replies = iter([(200, {"Connection": "close"}, answer()[2])])
    gateway = serve(lambda body: next(replies, answer()))
    route = DirectRoute(gateway.client())
    route.post(REQUEST)
    assert route.post(REQUEST).content == "ok"
    assert gateway.peers[0] != gateway.peers[1]


def test_a_429_is_the_sdks_rate_limit_error_with_its_headers(serve: Any) -> None:
    error = json.dumps({"error": {"message": "slow down"}}).encode()
    gateway = serve(lambda body: (429, {"Retry-After": "3"}, error))
    with pytest.raises(openai.RateLimitError) as caught:
        DirectRoute(gateway.client()).post(REQUEST)
    assert classify(caught.value) is ErrorKind.RATE_LIMITED
    assert parse_retry_after(caught.value.response.headers, time.time()) == 3.0
    assert "slow down" in str(caught.value)


def test_a_5xx_and_a_context_error_classify_as_through_the_sdk(serve: Any) -> None:
    overflow = b'{"error": {"message": "context length exceeded"}}'
    replies = iter([(503, {}, b"busy"), (400, {}, overflow)])
    gateway = serve(lambda body: next(replies, answer("again")))
    route = DirectRoute(gateway.client())
    with pytest.raises(openai.InternalServerError) as first:
        route.post(REQUEST)
    with pytest.raises(openai.BadRequestError) as second:
        route.post(REQUEST)
    assert classify(first.value) is ErrorKind.SERVER_ERROR
    assert classify(second.value) is ErrorKind.CONTEXT_OVERFLOW
    assert route.post(REQUEST).content == "again"  # the connection serves on after errors


def test_a_slow_answer_times_out_at_the_read_timeout(serve: Any) -> None:
    def slow(body: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        time.sleep(1.0)
        return answer()

    gateway = serve(slow)
    with pytest.raises(openai.APITimeoutError) as caught:
        DirectRoute(gateway.client(timeout=0.2)).post(REQUEST)
    assert classify(caught.value) is ErrorKind.TIMEOUT


def test_no_server_is_a_connection_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed when the block ends: nothing listens
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="k", max_retries=0)
    with pytest.raises(openai.APIConnectionError) as caught:
        DirectRoute(client).post(REQUEST)
    assert classify(caught.value) is ErrorKind.CONNECTION


def test_routes_fall_back_to_the_sdk_behind_a_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    client = openai.OpenAI(base_url="http://127.0.0.1:1/v1", api_key="k", max_retries=0)
    assert DirectRoutes().route(client) is not None
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy:3128")
    assert proxied({"HTTPS_PROXY": "http://proxy:3128"})
    assert DirectRoutes().route(client) is None
    assert DirectRoutes(enabled=False).route(client) is None


def test_routes_keep_one_route_per_client() -> None:
    routes = DirectRoutes()
    client = openai.OpenAI(base_url="http://127.0.0.1:1/v1", api_key="k", max_retries=0)
    assert routes.route(client) is routes.route(client)


def test_a_hosted_call_of_a_runtime_with_routes_goes_direct(serve: Any) -> None:
    gateway = serve(lambda body: answer("direct"))
    client = gateway.client()
    sdk_calls: list[int] = []
    client.post = lambda *a, **k: sdk_calls.append(1)  # type: ignore[method-assign]
    catalog = load_catalog(None)
    store = MemoryJobStore()
    rt = Runtime(Settings(), catalog, store, client, direct=DirectRoutes())
    store.create_job(job_spec(1), ["input"])
    result = run_call(rt, CallRequest.of("j1", "n00", SPEC, [{"role": "user", "content": "x"}], 8))
    assert result.ok and result.answer is not None and result.answer.content == "direct"
    assert sdk_calls == [] and len(gateway.bodies) == 1
