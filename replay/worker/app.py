"""The worker's HTTP API (JSON), assembled: one module per resource (traces, trace files,
analysis, replay sessions), sharing one cassette cache, behind bearer auth when tokens are
given. How a route answers and fails is decided once, in :mod:`routing`."""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.routing import BaseRoute

from rewind.collector.store import Store
from rewind.replay.worker import analysis, archives, replay_sessions, traces
from rewind.replay.worker.auth import BearerAuth
from rewind.replay.worker.cache import CassetteCache
from rewind.replay.worker.openapi import openapi_document
from rewind.replay.worker.routing import route


def create_app(store: Store, tokens: dict[str, str | None] | None = None) -> Starlette:
    """``tokens``: when given, every path but /health and /openapi.json needs one of them."""
    cassettes = CassetteCache(store)

    def health(request: Request) -> Any:
        return {"status": "ok", "store": "embedded" if store.embedded else "server"}

    def openapi(request: Request) -> Any:
        return openapi_document()

    routes: list[BaseRoute] = [
        route("/health", health),
        route("/openapi.json", openapi),
        *traces.routes(store, cassettes),
        *replay_sessions.routes(replay_sessions.SessionRegistry(cassettes.get)),
        *archives.routes(store),
        *analysis.routes(store, cassettes),
    ]
    middleware = [Middleware(BearerAuth, tokens=tokens)] if tokens else []
    app = Starlette(routes=routes, middleware=middleware)
    app.state.cassettes = cassettes
    return app
