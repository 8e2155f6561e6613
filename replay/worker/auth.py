"""Who is calling: bearer-token auth for the worker's HTTP API (the collector's tokens and
checks), as ASGI middleware that puts the caller's tenant in the request scope, where
:func:`routing.route` scopes every read and write by it."""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from rewind.collector.auth import Authenticator, AuthError
from rewind.replay.worker.routing import error_response
from rewind.replay.worker.tenancy import TENANT_KEY

OPEN_PATHS = frozenset({"/health", "/openapi.json"})


class BearerAuth:
    """With an authenticator: requests without one of its tokens get 401 (except open paths),
    and the token's tenant (None for an operator token) scopes the request. Without one
    (loopback development) every request sees every tenant."""

    def __init__(self, app: ASGIApp, authenticator: Authenticator | None) -> None:
        self.app = app
        self.authenticator = authenticator

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.authenticator is None:
            scope[TENANT_KEY] = None
        elif scope["path"] not in OPEN_PATHS:
            header = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1")
            try:
                scope[TENANT_KEY] = self.authenticator.check(header or None)
            except AuthError as error:
                response = error_response(401, str(error), {"www-authenticate": "Bearer"})
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
