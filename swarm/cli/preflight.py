"""Start-up checks of the gateway, before anything is enqueued."""

from __future__ import annotations

import openai

from swarm.errors import GatewayUnavailableError, MissingKeyError

NO_KEY = "no-key"
"""Sent when no key is set: a local server without a key accepts it."""
MISSING_KEY = "SWARM_API_KEY (or OPENAI_API_KEY) is missing"


def check_gateway(
    client: openai.OpenAI, base_url: str, timeout_s: float = 5.0, *, keyless: bool = False
) -> None:
    """List models once: one clear line for an unreachable gateway, a rejected key or a
    wrong base URL (a 404 on /models: usually the missing ``/v1``).

    Without a key (``keyless``) a gateway that lists its models anyway (a local server)
    passes; one that asks for a key says the key is missing. A 405 passes: the first call
    will tell.
    """
    try:
        client.with_options(timeout=timeout_s, max_retries=0).models.list()
    except openai.AuthenticationError:
        if keyless:
            raise MissingKeyError(f"the gateway {base_url} asks for a key: {MISSING_KEY}") from None
        raise GatewayUnavailableError(f"the gateway {base_url} rejected the API key") from None
    except openai.NotFoundError:
        raise GatewayUnavailableError(
            f"wrong base URL (missing /v1?): {base_url}/models answers 404"
        ) from None
    except openai.PermissionDeniedError:
        raise GatewayUnavailableError(f"the gateway {base_url} refused this key (403)") from None
    except openai.APIConnectionError as exc:
        reason = f"{type(exc).__name__}: {exc}" + (f"; {MISSING_KEY} too" if keyless else "")
        raise GatewayUnavailableError(f"cannot reach the gateway {base_url} ({reason})") from None
    except openai.APIStatusError as exc:
        if exc.status_code >= 500:
            raise GatewayUnavailableError(
                f"the gateway {base_url} answers {exc.status_code} to /models"
            ) from None
