"""Start-up checks of the gateway, before anything is enqueued."""

from __future__ import annotations

import logging

import openai

from swarm.calls.gateway import NO_KEY
from swarm.errors import GatewayUnavailableError, MissingKeyError
from swarm.settings import KEY_VARIABLE

__all__ = ["NO_KEY", "check_gateway"]

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
