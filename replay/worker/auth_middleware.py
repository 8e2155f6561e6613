"""Who is calling: bearer-token auth for the worker's HTTP API and pages (the collector's tokens
and checks), as ASGI middleware that puts the caller's tenant in the request scope, where
:func:`routing.route` scopes every read and write by it.

A browser cannot send a bearer header when it opens a page, so the same token is also taken
from the cookie ``/login`` sets (:data:`TOKEN_COOKIE`), for reads only (GET and HEAD): a page
another site makes a browser load cannot write anything with it. A browser opening a page
without a valid token gets the sign-in form, with the 401.
"""

from __future__ import annotations

from http.cookies import SimpleCookie
from urllib.parse import quote, unquote

from starlette.responses import HTMLResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from rewind.collector.auth import Authenticator, AuthError
from rewind.replay.ui.assets import PAGE_HEADERS, STATIC_FILES, STATIC_PREFIX, login_html
from rewind.replay.worker.routing import error_response
from rewind.replay.worker.tenancy import TENANT_KEY

LOGIN_PATH = "/login"
OPEN_PATHS = frozenset({"/health", "/openapi.json", LOGIN_PATH,
                        *(STATIC_PREFIX + name for name in STATIC_FILES)})
TOKEN_COOKIE = "rewind_token"
READS = frozenset({"GET", "HEAD"})
CHALLENGE = {"www-authenticate": "Bearer"}


def token_cookie(token: str, secure: bool) -> str:
    """The Set-Cookie value keeping ``token`` for this worker's pages."""
    flags = "; Path=/; HttpOnly; SameSite=Strict" + ("; Secure" if secure else "")
    return f"{TOKEN_COOKIE}={quote(token, safe='')}{flags}"


def cookie_token(scope: Scope) -> str | None:
    raw = dict(scope["headers"]).get(b"cookie", b"").decode("latin-1")
    try:
        morsel = SimpleCookie(raw).get(TOKEN_COOKIE)
    except Exception:  # a malformed Cookie header is no token
        return None
    return unquote(morsel.value) if morsel is not None and morsel.value else None


def wants_page(scope: Scope) -> bool:
    """A browser opening a page (it asks for HTML), not a script reading JSON."""
    accept = dict(scope["headers"]).get(b"accept", b"").decode("latin-1")
    return scope["method"] in READS and "text/html" in accept


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
            if not header and scope["method"] in READS and (token := cookie_token(scope)):
                header = f"Bearer {token}"
            try:
                scope[TENANT_KEY] = self.authenticator.check(header or None)
            except AuthError as error:
                await self._refuse(scope, str(error))(scope, receive, send)
                return
        await self.app(scope, receive, send)

    @staticmethod
    def _refuse(scope: Scope, message: str) -> Response:
        if wants_page(scope):
            query = scope.get("query_string", b"").decode("latin-1")
            here = scope["path"] + (f"?{query}" if query else "")
            return HTMLResponse(login_html(here, "Sign in to see this page."), 401,
                                {**PAGE_HEADERS, **CHALLENGE})
        return error_response(401, message, CHALLENGE)
