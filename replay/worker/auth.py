"""Bearer-token auth for the worker's HTTP API: the collector's tokens and checks, as ASGI
middleware."""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from rewind.collector.auth import Authenticator, AuthError
from rewind.replay.worker.routing import error_response

OPEN_PATHS = frozenset({"/health", "/openapi.json"})


class BearerAuth:
    """Rejects requests without one of the configured tokens (401), except open paths."""

    def __init__(self, app: ASGIApp, tokens: dict[str, str | None]) -> None:
        self.app = app
        self.authenticator = Authenticator(tokens)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        header = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1")
        try:
            self.authenticator.check(header or None)
        except AuthError as error:
            response = error_response(401, str(error), {"www-authenticate": "Bearer"})
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)
