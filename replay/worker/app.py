"""The worker's HTTP API (JSON) and web UI, assembled: one module per resource (traces, trace
files, analysis, replay sessions, the pages), sharing one cassette cache, behind bearer auth
when tokens are given and, in front of every route, the one check of Host and Origin
(``collector/access/request_origin.py``). How a route answers and fails, and which tenant's data it
sees, is decided once, in :mod:`routing`; ``/mcp`` serves the assistant's tools
(``assist/streamable.py``) when the mcp extra is installed, else one line naming it. The MCP
server is loaded on the first ``/mcp`` request, not at start: mcp and pydantic hold ~35 MB that
a worker nobody asks for its tools would keep for nothing."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup, TaskStatus
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from rewind.collector.access.auth import Authenticator
from rewind.collector.access.request_origin import RequestGuard, ServedHosts
from rewind.collector.store.server_settings import allowed_hosts as configured_hosts
from rewind.collector.store.store import Store, public_url, store_id
from rewind.exporter.servers import unrecorded
from rewind.replay.assist import MCP_EXTRA, MCP_PATH
from rewind.replay.sources.cli_settings import worker_live_hosts
from rewind.replay.worker.auth_middleware import BearerAuth
from rewind.replay.worker.cache import CassetteCache
from rewind.replay.worker.openapi import openapi_document
from rewind.replay.worker.routes import analysis, archives, pages, replay_sessions, traces
from rewind.replay.worker.routing import app_route, internal_error, route
from rewind.replay.worker.tenancy import StoreAccess


def create_app(store: Store, tokens: dict[str, str | None] | None = None,
               authenticator: Authenticator | None = None, token_option: str = "",
               allowed_hosts: tuple[str, ...] | None = None) -> Starlette:
    """With ``tokens`` (or an ``authenticator``, shared with a collector and kept current by
    its reloader) every path but /health and /openapi.json needs a token, and a token mapped
    to a tenant sees only that tenant's traces. ``token_option``: the option that gave the
    tokens, which the sign-in form names. Every path, tokens or not, answers only the host
    names it is reached by (loopback names, addresses, ``allowed_hosts``; None: the
    ``REWIND_ALLOWED_HOSTS`` setting) and no request another site's page made a browser send
    (:class:`RequestGuard`, in front of everything)."""
    if authenticator is None and tokens:
        authenticator = Authenticator(tokens)
    served = ServedHosts(allowed_hosts if allowed_hosts is not None else configured_hosts())
    cassettes = CassetteCache(store)
    assistant = LazyAssistant()

    def health(request: Request) -> Any:
        # the store it serves, without credentials: a client tells whether it is the one wanted
        # (behind tokens by its digest alone: the route is public)
        found = {"status": "ok", "store": "embedded" if store.embedded else "server",
                 "store_id": store_id(store.url)}
        return found if authenticator is not None else {**found,
                                                        "store_url": public_url(store.url)}

    def openapi(request: Request) -> Any:
        return openapi_document()

    routes: list[BaseRoute] = [
        route("/health", health, public=True),
        route("/openapi.json", openapi, public=True),
        # replayed calls, the most frequent requests, first: each route tried costs a match
        *replay_sessions.routes(replay_sessions.SessionRegistry(live=replay_sessions.LivePolicy(
            guarded=authenticator is not None, hosts=worker_live_hosts()))),
        *traces.routes(),
        *archives.routes(),
        *analysis.routes(),
        *pages.routes(authenticator),
        app_route(MCP_PATH, assistant, methods=["GET", "POST", "DELETE"]),
    ]
    app = Starlette(routes=routes,
                    middleware=[Middleware(RequestGuard, served=served, refuse=pages.refused),
                                Middleware(BearerAuth, authenticator=authenticator)],
                    # a bug outside a route (the auth middleware): answered as a route's is
                    exception_handlers={Exception: lambda request, error: internal_error(error),
                                        404: pages.not_found},
                    lifespan=assistant.lifespan)
    app.state.access = StoreAccess(store, cassettes)
    app.state.cassettes = cassettes
    app.state.token_option = token_option
    return unrecorded(app)


class LazyAssistant:
    """``/mcp``: the MCP server made on the first request (its import in a thread, so other
    requests are served meanwhile), its sessions kept in a task group of the worker's lifespan
    from then to shutdown; without the mcp extra, one line naming it (501)."""

    def __init__(self) -> None:
        self._app: ASGIApp | None = None
        self._missing = False
        self._group: TaskGroup | None = None
        self._lock = anyio.Lock()

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Any) -> AsyncIterator[None]:
        async with anyio.create_task_group() as group:
            self._group = group
            try:
                yield
            finally:
                self._group = None
                group.cancel_scope.cancel()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        app = self._app or await self._load()
        if app is None:
            missing = PlainTextResponse(f"the MCP tools need the mcp extra: {MCP_EXTRA}\n",
                                        status_code=501)
            await missing(scope, receive, send)
            return
        await app(scope, receive, send)

    async def _load(self) -> ASGIApp | None:
        async with self._lock:
            if self._app is None and not self._missing:
                made = await anyio.to_thread.run_sync(_assistant_class)
                if made is None:
                    self._missing = True
                    return None
                if self._group is None:
                    raise RuntimeError("the worker's lifespan is not running: /mcp has no "
                                       "task group for its sessions")
                assistant = made()
                await self._group.start(_serve_sessions, assistant)
                self._app = assistant.app
        return self._app


async def _serve_sessions(assistant: Any, *, task_status: TaskStatus[None]) -> None:
    async with assistant.running():
        task_status.started()
        await anyio.sleep_forever()


def _assistant_class() -> Any:
    """The /mcp server's class, or None when the mcp package is missing here or older than
    2.3 (no ``mcp.server.mcpserver``): the worker serves everything else."""
    try:
        from rewind.replay.assist.streamable import Assistant
    except ImportError as error:
        if (error.name or "").partition(".")[0] not in ("mcp", "mcp_types", "pydantic"):
            raise
        return None
    return Assistant
