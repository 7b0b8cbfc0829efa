"""The simulator's routes besides the chat: the model list (as a gateway answers it),
its counters (GET /stats, POST /stats/reset) and GET /health."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiohttp import web

from swarm.sim.account import Account
from swarm.sim.config import SimConfig
from swarm.sim.errors import error_response
from swarm.sim.stats import Stats

Authorized = Callable[[web.Request], bool]


class Info:
    """The handlers of the model list, the counters and the health check."""

    def __init__(
        self, config: SimConfig, stats: Stats, account: Account, authorized: Authorized
    ) -> None:
        self.config, self.stats, self.account = config, stats, account
        self.authorized = authorized

    def _refused(self, request: web.Request) -> web.Response | None:
        """The model routes' 404 (``no_models``) or 401 (a wrong key), else None."""
        if self.config.no_models:
            return error_response(
                404, "Not found: only /v1/chat/completions is served", "not_found"
            )
        if not self.authorized(request):
            return error_response(401, "Incorrect API key provided", "invalid_api_key")
        return None

    async def models(self, request: web.Request) -> web.Response:
        """GET /v1/models: the known model names in OpenAI list format (404 with
        ``no_models``)."""
        if (refused := self._refused(request)) is not None:
            return refused
        data = [model_entry(name) for name in self.config.models]
        return web.json_response({"object": "list", "data": data})

    async def model(self, request: web.Request) -> web.Response:
        """GET /v1/models/{model}: any name is a model (404 with ``no_models``)."""
        if (refused := self._refused(request)) is not None:
            return refused
        return web.json_response(model_entry(request.match_info["model"]))

    async def counters(self, request: web.Request) -> web.Response:
        """GET /stats."""
        return web.json_response({**self.stats.snapshot(), "account": self.account.snapshot()})

    async def reset(self, request: web.Request) -> web.Response:
        """POST /stats/reset: zero the counters (limits and prompt caches are kept)."""
        self.stats.reset()
        return web.json_response(self.stats.snapshot())

    async def health(self, request: web.Request) -> web.Response:
        """GET /health."""
        return web.json_response({"status": "ok"})


def model_entry(name: str) -> dict[str, Any]:
    """One model of the list, in OpenAI's shape."""
    return {"id": name, "object": "model", "created": 0, "owned_by": "swarm-sim"}


def mount_info(app: web.Application, info: Info) -> None:
    """Serve the model list, the counters and the health check on ``app``."""
    app.router.add_get("/v1/models", info.models)
    app.router.add_get("/v1/models/{model}", info.model)
    app.router.add_get("/stats", info.counters)
    app.router.add_post("/stats/reset", info.reset)
    app.router.add_get("/health", info.health)
