"""Who is calling: bearer-token auth for the worker's HTTP API and pages (the collector's tokens
and checks, with their back-off on wrong tokens), as ASGI middleware that puts the caller's
tenant in the request scope, where :func:`routing.route` scopes every read and write by it.

Routes are of four kinds (:func:`route_kind`), told by their path before any route runs: open
(health, the API description, sign-in and sign-out, static files), pages (the web UI and the
JSON it draws), replay (``/replay/...``, recorded answers served again) and the API. A browser
cannot send a bearer header when it opens a page, so for pages only the same token is also taken
from the cookie ``/login`` sets (:data:`TOKEN_COOKIE`), for reads only (GET and HEAD): a page
another site makes a browser load cannot write anything with it, and a recorded answer is never
served on the strength of a cookie. A browser opening a page without a valid token gets the
sign-in form, with the 401.

Sign-in and sign-out are forms: a POST to them must carry the token of the CSRF cookie
(:data:`CSRF_COOKIE`, double-submitted: the same value in the cookie and in the form). One sent
from another origin never gets here: the app's request guard
(``collector/access/request_origin.py``, in front of this middleware) refuses any request
another site's page makes a browser send, and any ``Host`` the worker is not reached by.
"""

from __future__ import annotations

import hmac
import secrets
from http.cookies import SimpleCookie
from urllib.parse import quote, unquote

from starlette.responses import HTMLResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from rewind.collector.access.auth import Authenticator, AuthError
from rewind.collector.access.auth_backoff import TooManyFailures
from rewind.replay.ui.assets import PAGE_HEADERS, STATIC_FILES, STATIC_PREFIX, login_html
from rewind.replay.worker.routing import error_response
from rewind.replay.worker.tenancy import TENANT_KEY

LOGIN_PATH = "/login"
LOGOUT_PATH = "/logout"
OPEN_PATHS = frozenset({"/health", "/openapi.json", LOGIN_PATH, LOGOUT_PATH,
                        *(STATIC_PREFIX + name for name in STATIC_FILES)})
OPEN, PAGE, REPLAY, API = "open", "page", "replay", "api"
REPLAY_PREFIX = "/replay/"
API_PREFIX, PAGE_DATA_PREFIX = "/v1/", "/v1/ui/"
TOKEN_COOKIE = "rewind_token"
CSRF_COOKIE = "rewind_csrf"
CSRF_FIELD = "csrf"
READS = frozenset({"GET", "HEAD"})
CHALLENGE = {"www-authenticate": "Bearer"}


def route_kind(path: str) -> str:
    """Which kind of route ``path`` is: :data:`OPEN`, :data:`PAGE`, :data:`REPLAY` or
    :data:`API` (``/v1/...`` but the pages' own JSON under ``/v1/ui/``); any other path is a
    page's."""
    if path in OPEN_PATHS:
        return OPEN
    if path.startswith(REPLAY_PREFIX):
        return REPLAY
    if path.startswith(API_PREFIX) and not path.startswith(PAGE_DATA_PREFIX):
        return API
    return PAGE


def _cookie(name: str, value: str, secure: bool, max_age: int | None = None) -> str:
    flags = "; Path=/; HttpOnly; SameSite=Strict" + ("; Secure" if secure else "")
    return f"{name}={quote(value, safe='')}{flags}" + (
        f"; Max-Age={max_age}" if max_age is not None else "")


def token_cookie(token: str, secure: bool) -> str:
    """The Set-Cookie value keeping ``token`` for this worker's pages ('' forgets it)."""
    return _cookie(TOKEN_COOKIE, token, secure, None if token else 0)


def read_cookie(scope: Scope, name: str) -> str | None:
    raw = dict(scope["headers"]).get(b"cookie", b"").decode("latin-1")
    try:
        morsel = SimpleCookie(raw).get(name)
    except Exception:  # a malformed Cookie header is no token
        return None
    return unquote(morsel.value) if morsel is not None and morsel.value else None


def cookie_token(scope: Scope) -> str | None:
    return read_cookie(scope, TOKEN_COOKIE)


def csrf_token(scope: Scope) -> tuple[str, str | None]:
    """The CSRF token a form of this browser carries, and the Set-Cookie value that gives it
    one when it has none yet (else None)."""
    known = read_cookie(scope, CSRF_COOKIE)
    if known and len(known) >= 32:
        return known, None
    fresh = secrets.token_urlsafe(32)
    return fresh, _cookie(CSRF_COOKIE, fresh, scope.get("scheme") == "https")


def form_refusal(scope: Scope, submitted: str) -> str | None:
    """Why a sign-in or sign-out form is refused: without the CSRF token of this browser's
    cookie; None when it stands (one sent from elsewhere was refused before: the guard)."""
    expected = read_cookie(scope, CSRF_COOKIE) or ""
    if not expected or not hmac.compare_digest(expected.encode(), submitted.encode()):
        return "the form is not this worker's own (reload the page and send it again)"
    return None


def client_address(scope: Scope) -> str | None:
    client = scope.get("client")
    return client[0] if client else None


def token_option(scope: Scope) -> str:
    """How the worker serving ``scope`` was given its tokens, for the sign-in form to say."""
    app = scope.get("app")
    return str(getattr(getattr(app, "state", None), "token_option", "") or "")


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
        elif (kind := route_kind(scope["path"])) != OPEN:
            header = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1")
            if not header and kind == PAGE and scope["method"] in READS and \
                    (token := cookie_token(scope)):
                header = f"Bearer {token}"
            try:
                scope[TENANT_KEY] = self.authenticator.check(header or None,
                                                             client_address(scope))
            except (AuthError, TooManyFailures) as error:
                await self._refuse(scope, kind, error)(scope, receive, send)
                return
        await self.app(scope, receive, send)

    @staticmethod
    def _refuse(scope: Scope, kind: str, error: AuthError | TooManyFailures) -> Response:
        throttled = isinstance(error, TooManyFailures)
        headers = {"retry-after": str(error.retry_after)} if throttled else CHALLENGE
        status = 429 if throttled else 401
        if kind == PAGE and wants_page(scope):
            query = scope.get("query_string", b"").decode("latin-1")
            here = scope["path"] + (f"?{query}" if query else "")
            csrf, set_cookie = csrf_token(scope)
            response = HTMLResponse(
                login_html(here, f"{error}." if throttled else "", csrf,
                           "" if throttled else "Sign in to see this page.",
                           token_option(scope)), status, {**PAGE_HEADERS, **headers})
            if set_cookie:
                response.headers.append("set-cookie", set_cookie)
            return response
        return error_response(status, str(error), headers)
