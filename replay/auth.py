"""Bearer-token auth for the worker's HTTP API."""

from __future__ import annotations

import hmac
from collections.abc import Iterable
from pathlib import Path

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

OPEN_PATHS = frozenset({"/health", "/openapi.json"})


def read_tokens(path: str | Path) -> dict[str, str]:
    """``token [tenant]`` per line; blank lines and ``#`` comments ignored."""
    tokens: dict[str, str] = {}
    for number, line in enumerate(Path(path).read_text("utf-8").splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split()
        if len(fields) > 2:
            raise ValueError(f"{path}, line {number}: expected 'token [tenant]'")
        tokens[fields[0]] = fields[1] if len(fields) == 2 else ""
    return tokens


class BearerAuth:
    """Rejects requests without one of the configured tokens (401), except open paths."""

    def __init__(self, app: ASGIApp, tokens: Iterable[str]) -> None:
        self.app = app
        self.tokens = [t.encode() for t in tokens]

    def _allowed(self, header: bytes) -> bool:
        scheme, _, token = header.partition(b" ")
        if scheme.lower() != b"bearer" or not token:
            return False
        return any(hmac.compare_digest(token.strip(), t) for t in self.tokens)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        header = dict(scope["headers"]).get(b"authorization", b"")
        if not self._allowed(header):
            response = JSONResponse(
                {"error": "missing or invalid bearer token"}, status_code=401,
                headers={"www-authenticate": "Bearer"},
            )
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)
