"""A ``make_client`` client sends only the headers a gateway uses, to the merged URL."""

from __future__ import annotations

import json

import httpx2
import openai
from doubles import completion
from openai import RequestOptions
from openai._models import FinalRequestOptions

from swarm.calls.gateway import SDK_SECURITY, make_client, request_options, send
from swarm.calls.request import CallRequest
from swarm.catalog import load_catalog
from swarm.settings import Settings

SPEC = load_catalog().model("kimi-k2.5")
MSGS = [{"role": "user", "content": "hi"}]


def sent(
    base_url: str, read_timeout_s: float | None = None, calls: int = 2
) -> list[httpx2.Request]:
    seen: list[httpx2.Request] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return completion("ok")

    client = make_client(Settings(), base_url, "k-1", transport=httpx2.MockTransport(handler))
    for _ in range(calls):
        answer = send(client, CallRequest.of("j", "n0", SPEC, MSGS, 64), read_timeout_s)
        assert answer.content == "ok"
    return seen


def test_requests_carry_auth_and_the_sdks_user_agent_but_no_telemetry_headers() -> None:
    for request in sent("http://gw/v1"):
        assert not [name for name in request.headers if name.startswith("x-stainless")]
        assert request.headers["authorization"] == "Bearer k-1"
        assert request.headers["content-type"] == "application/json"
        assert request.headers["user-agent"] == f"OpenAI/Python {openai.__version__}"
        assert json.loads(request.content)["messages"] == MSGS


def test_every_request_goes_to_the_base_urls_completion_path() -> None:
    for base in ("http://gw/v1", "http://gw/v1/", "http://gw:8080/api/v1"):
        urls = {str(request.url) for request in sent(base, calls=3)}
        assert urls == {base.rstrip("/") + "/chat/completions"}


def test_a_read_timeout_replaces_the_clients_only_for_that_request() -> None:
    settings = Settings()
    (late,) = sent("http://gw/v1", read_timeout_s=3.0, calls=1)
    (plain,) = sent("http://gw/v1", calls=1)
    assert late.extensions["timeout"]["read"] == 3.0
    assert late.extensions["timeout"]["connect"] == settings.connect_timeout_s
    assert plain.extensions["timeout"]["read"] == settings.node_timeout_s
    assert not [name for name in late.headers if name.startswith("x-stainless")]


def test_a_request_names_each_option_the_sdk_would_copy_a_default_for() -> None:
    """Every option a request may carry whose SDK default is copied per request (a NotGiven
    sentinel or a non-empty dict) is given, as the value the SDK would have taken."""
    client = make_client(Settings(), "http://gw/v1", "k-1")
    options = request_options(client)
    copied = {
        name
        for name, field in FinalRequestOptions.model_fields.items()
        if name in RequestOptions.__annotations__
        and (isinstance(field.default, openai.NotGiven) or (isinstance(field.default, dict)
                                                            and field.default))
    }  # fmt: skip
    assert copied - {"headers"} == {"max_retries", "timeout", "security"}
    assert copied <= set(options)
    assert options["max_retries"] == client.max_retries == 0
    assert options["timeout"] is client.timeout
    assert options["security"] == SDK_SECURITY == {"bearer_auth": True, "admin_api_key_auth": True}
    late = request_options(client, 3.0)["timeout"]
    assert isinstance(late, httpx2.Timeout) and late.read == 3.0


def test_a_request_draws_no_default_the_sdk_would_copy_or_generate() -> None:
    """The post parser (a FinalRequestOptions field RequestOptions does not list) reaches
    the SDK's options as given, and the idempotency key the SDK would draw a uuid4 for is
    given, unique per request."""
    client = make_client(Settings(), "http://gw/v1", "k-1")
    first, second = request_options(client), request_options(client)
    built = FinalRequestOptions.construct(method="post", url="/chat/completions", **first)
    assert built.post_parser is openai.NOT_GIVEN
    assert built.idempotency_key == first["idempotency_key"] != second["idempotency_key"]
    assert len(first["idempotency_key"]) == 32 and int(first["idempotency_key"], 16) >= 0
