"""Start-up checks of the gateway, before anything is enqueued."""

from __future__ import annotations

import openai

from swarm.errors import GatewayUnavailableError


def check_gateway(client: openai.OpenAI, base_url: str, timeout_s: float = 5.0) -> None:
    """List models once: one clear line for an unreachable gateway or a rejected key.

    Gateways that do not implement /models (404, 405) pass: the first call will tell.
    """
    try:
        client.with_options(timeout=timeout_s, max_retries=0).models.list()
    except openai.AuthenticationError:
        raise GatewayUnavailableError(f"the gateway {base_url} rejected the API key") from None
    except openai.PermissionDeniedError:
        raise GatewayUnavailableError(f"the gateway {base_url} refused this key (403)") from None
    except openai.APIConnectionError as exc:
        reason = f"{type(exc).__name__}: {exc}"
        raise GatewayUnavailableError(f"cannot reach the gateway {base_url} ({reason})") from None
    except openai.APIStatusError as exc:
        if exc.status_code >= 500:
            raise GatewayUnavailableError(
                f"the gateway {base_url} answers {exc.status_code} to /models"
            ) from None
