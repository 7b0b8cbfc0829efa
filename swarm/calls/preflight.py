"""Start-up checks of the gateway, before anything is enqueued: it answers (its model
list, ``check_gateway``), and it takes requests shaped as the job's (``check_requests``)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping

import openai

from swarm.calls.gateway import NO_KEY, answer_from_json, backend_endpoints, make_client
from swarm.calls.request import CallRequest
from swarm.calls.retry_policy import BadResponseError
from swarm.catalog import Catalog, ModelSpec
from swarm.cost.pricing import cost_nusd
from swarm.errors import ConfigError, GatewayUnavailableError, MissingKeyError
from swarm.records import Usage
from swarm.settings import KEY_VARIABLE, Settings
from swarm.store.billing import BilledCall
from swarm.unique import unique_hex

__all__ = ["NO_KEY", "check_gateway", "check_requests"]

log = logging.getLogger(__name__)

MISSING_KEY = f"{KEY_VARIABLE} is missing"


def check_gateway(
    client: openai.OpenAI, base_url: str, timeout_s: float = 5.0, *, keyless: bool = False
) -> None:
    """List models once: one clear line for an unreachable gateway, a rejected key or a
    wrong base URL.

    A 404 on /models alone does not refuse: many proxies serve only the completion path,
    so an empty ``POST /chat/completions`` (which no gateway computes or bills) asks whether
    that path exists; only a 404 there too refuses, with the "missing /v1?" hint. Without a
    key (``keyless``) a gateway that answers anyway (a local server) passes; one that asks
    for a key says the key is missing. Any other 4xx (a 405, say) passes: the first call
    will tell.
    """
    quick = client.with_options(timeout=timeout_s, max_retries=0)
    try:
        quick.models.list()
    except openai.NotFoundError:
        _check_completion_path(quick, base_url, keyless)
    except openai.APIError as exc:
        _refuse(exc, base_url, "/models", keyless=keyless)


def _check_completion_path(client: openai.OpenAI, base_url: str, keyless: bool) -> None:
    """/models is 404: pass if ``POST /chat/completions`` with ``{}`` is rejected as a bad
    request (400/422: the path exists), refuse if it is 404 too."""
    try:
        client.post("/chat/completions", body={}, cast_to=object)
    except (openai.BadRequestError, openai.UnprocessableEntityError) as exc:
        log.debug(
            "%s/models answers 404 but an empty POST %s/chat/completions answers %d: "
            "the completion path exists, the gateway is accepted",
            base_url, base_url, exc.status_code,
        )  # fmt: skip
        return
    except openai.NotFoundError:
        raise GatewayUnavailableError(
            f"wrong base URL (missing /v1?): {base_url}/models and "
            f"{base_url}/chat/completions answer 404"
        ) from None
    except openai.APIError as exc:
        _refuse(exc, base_url, "/chat/completions", keyless=keyless)
        return
    log.debug("%s/models answers 404 but /chat/completions accepts an empty body", base_url)


def _refuse(exc: openai.APIError, base_url: str, path: str, *, keyless: bool) -> None:
    """Raise the one-line reason ``exc`` (the answer to ``path``) stands for, if any."""
    if isinstance(exc, openai.AuthenticationError):
        if keyless:
            raise MissingKeyError(f"the gateway {base_url} asks for a key: {MISSING_KEY}") from None
        raise GatewayUnavailableError(
            f"the gateway {base_url} rejected the API key in {KEY_VARIABLE}"
        ) from None
    if isinstance(exc, openai.PermissionDeniedError):
        raise GatewayUnavailableError(
            f"the gateway {base_url} refused the key in {KEY_VARIABLE} (403)"
        ) from None
    if isinstance(exc, openai.APIConnectionError):
        reason = f"{type(exc).__name__}: {exc}" + (f"; {MISSING_KEY} too" if keyless else "")
        raise GatewayUnavailableError(f"cannot reach the gateway {base_url} ({reason})") from None
    if isinstance(exc, openai.APIStatusError) and exc.status_code >= 500:
        raise GatewayUnavailableError(
            f"the gateway {base_url} answers {exc.status_code} to {path}"
        ) from None
    log.debug("the gateway %s answers %s to %s: passed, the first call will tell", base_url,
              getattr(exc, "status_code", type(exc).__name__), path)  # fmt: skip


PROBE_MAX_TOKENS = 16
"""The completion cap of a request-shape check: enough for any provider to answer."""
PROBE_MESSAGES = ({"role": "user", "content": "Reply with OK."},)
SHAPE_TIMEOUT_S = 30.0
"""How long a request-shape check waits (a thinking model reasons before its 16 tokens)."""
Endpoint = tuple[openai.OpenAI, str]
"""A gateway's client and base URL."""
Bill = tuple[ModelSpec, Usage]
"""A check's answer: the model and the usage the gateway billed."""


def check_requests(
    calls: Iterable[tuple[ModelSpec, str]],
    endpoint_of: Callable[[ModelSpec], Endpoint | None],
    source: str,
    *,
    json_mode: bool = False,
) -> list[Bill]:
    """Send one small request per distinct request shape of a job ((model, kind) pairs
    whose bodies differ only in their messages are sent once), built by the request code
    its nodes use (CallRequest.body: the same sampling, thinking and cap fields), so a field
    the provider refuses (HTTP 400) stops the job before anything is queued: ConfigError
    with the provider's message and the catalog line to change. Other answers pass (the
    first call will tell); a model without an endpoint (the workers' own) is not checked.
    Each request is billed by the gateway (16 completion tokens at most): the answers' usage
    is returned, to be counted in the job's ledger (``billed_calls``)."""
    seen: set[tuple[str, str]] = set()
    bills: list[Bill] = []
    for model, kind in calls:
        endpoint = endpoint_of(model)
        if endpoint is None:
            continue
        request = probe_request(model, kind, json_mode)
        shape = {k: v for k, v in request.body().items() if k != "messages"}
        key = (endpoint[1], json.dumps(shape, sort_keys=True, default=str))
        if key not in seen:
            seen.add(key)
            usage = check_request(*endpoint, request, source)
            if usage is not None:
                bills.append((model, usage))
    return bills


def billed_calls(bills: Iterable[Bill]) -> list[BilledCall]:
    """The checks' answers as billed calls of the job they were made for."""
    return [BilledCall(call_id=unique_hex(), model=model.name, usage=usage,
                       cost_nusd=cost_nusd(model, usage)) for model, usage in bills]  # fmt: skip


def probe_request(model: ModelSpec, kind: str, json_mode: bool = False) -> CallRequest:
    """The small request shaped as ``model``'s calls of ``kind``."""
    return CallRequest.of("preflight", "preflight", model, PROBE_MESSAGES, PROBE_MAX_TOKENS,
                          kind=kind, json_mode=json_mode)  # fmt: skip


def check_job_requests(
    settings: Settings,
    catalog: Catalog,
    calls: Iterable[tuple[ModelSpec, str]],
    key: str,
    environ: Mapping[str, str],
    *,
    json_mode: bool = False,
) -> list[Bill]:
    """``check_requests`` at the gateway each model is called through: its backend's own
    base URL and key, else SWARM_BASE_URL with ``key``."""
    endpoints = backend_endpoints(settings, catalog, environ)
    clients: dict[str, Endpoint] = {}

    def endpoint_of(model: ModelSpec) -> Endpoint | None:
        url, model_key = endpoints.get(model.backend, (settings.base_url, key))
        if url is None:
            return None
        if url not in clients:
            clients[url] = (make_client(settings, url, model_key), url)
        return clients[url]

    try:
        source = str(settings.config) if settings.config else "(packaged)"
        return check_requests(calls, endpoint_of, source, json_mode=json_mode)
    finally:
        for client, _ in clients.values():
            client.close()


def check_request(
    client: openai.OpenAI, base_url: str, request: CallRequest, source: str
) -> Usage | None:
    """Send ``request`` (a ``probe_request``); ConfigError when the gateway refuses it, else
    the usage its answer billed (None: not answered)."""
    model, kind = request.model, request.kind
    quick = client.with_options(timeout=SHAPE_TIMEOUT_S, max_retries=0)
    try:
        raw = quick.post("/chat/completions", body=request.body(), cast_to=object)
    except (openai.BadRequestError, openai.UnprocessableEntityError) as exc:
        if _mentions_context(exc):
            return None
        raise ConfigError(refusal_line(exc, request, base_url, source)) from None
    except openai.APIError as exc:
        log.debug("request check of %s (%s) at %s: %s, passed (the first call will tell)",
                  model.name, kind, base_url, type(exc).__name__)  # fmt: skip
        return None
    log.debug("request check of %s (%s) at %s: accepted", model.name, kind, base_url)
    try:
        return answer_from_json(raw).usage
    except BadResponseError as exc:  # a thinking model cut at 16 tokens: billed all the same
        return exc.usage


def refusal_line(
    exc: openai.APIStatusError, request: CallRequest, base_url: str, source: str
) -> str:
    """One line: who refused what, the provider's words, and the catalog line to change."""
    model = request.model
    table = f'[models."{model.name}"]'
    sent = {k: v for k, v in request.body().items() if k not in ("model", "messages")}
    return (
        f"the gateway {base_url} refused a request shaped as this job's {request.kind} calls "
        f"to {model.name} (HTTP {exc.status_code}: {provider_message(exc)}); swarm sent "
        f"{json.dumps(sent, sort_keys=True)}. Change {_catalog_key(exc, request)} in {table} "
        f"of the catalog {source} (provider {model.fields.provider}; docs/providers.md)"
    )


def provider_message(exc: openai.APIStatusError) -> str:
    """The provider's own message in an error answer."""
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, dict) else None
        if isinstance(message, str) and message:
            return message
    return str(exc.message)


def _catalog_key(exc: openai.APIStatusError, request: CallRequest) -> str:
    """The catalog key behind the body field the provider's message names."""
    text = f"{provider_message(exc)} {getattr(exc, 'param', '') or ''}".lower()
    shape = request.model.shape(request.kind)
    if shape.cap_field in text or "max_completion_tokens" in text:
        return "max_tokens_field (or reasoning)"
    if "thinking" in text or "reasoning" in text:
        return "thinking (or thinking_by_kind, echo_reasoning)"
    for name in shape.fields:
        if name in text:
            key = "extra_body" if name in request.model.extra_body else "sampling"
            return f"{key} (it sends {name})"
    return "provider, sampling, thinking or extra_body"


def _mentions_context(exc: openai.APIStatusError) -> bool:
    text = str(exc).lower()
    return "context" in text and ("length" in text or "window" in text)
