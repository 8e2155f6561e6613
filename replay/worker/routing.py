"""How every worker route is declared, so none answers in its own way.

A handler gets the request and the store as the caller may see it (a
:class:`~rewind.replay.worker.tenancy.TenantView`, built here from the tenant the auth
middleware put in the request scope: no handler can forget the tenant), returns data (or a
ready :class:`Response`) and raises our errors; :func:`route` checks the trace id in its path
with the one parser, writes the JSON, and answers each of our errors (a
:class:`~rewind.exporter.core.errors.RewindError`) with the status it carries. Every error body is
``{"error": message}`` (and ``"hint"`` when the error names a fix). Anything else is a bug: a
500 whose body carries an ``error_id``, logged with the traceback under the same id.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from rewind.exporter.core.errors import InvalidValue, RewindError
from rewind.exporter.core.redaction import RESPONSE_HEADERS_KEPT, keep_headers
from rewind.replay.assist import VIEW_KEY
from rewind.replay.cassette.ids import is_trace_id, parse_trace_id
from rewind.replay.sources.locate import resolve_trace_id
from rewind.replay.ui.assets import json_default
from rewind.replay.worker.tenancy import TENANT_KEY, StoreAccess

Handler = Callable[..., Any]  # (request, view), or (request) for a public route

TRACE_ID_PARAM = "trace_id"
log = logging.getLogger("rewind.worker")
# Recorded bytes are data, never a page of this origin: a browser that opens one runs no
# script, sends no request, guesses no other type and (but for these types) only downloads it.
DATA_HEADERS = {"content-security-policy": "sandbox; default-src 'none'",
                "x-content-type-options": "nosniff"}
SHOWN_INLINE = frozenset({"application/json", "text/event-stream", "text/plain",
                          "application/x-ndjson"})


def recorded_headers(recorded: Mapping[str, str]) -> dict[str, str]:
    """The headers of a recorded answer served again: only those the exporter records
    (``redaction.RESPONSE_HEADERS_KEPT``: never a cookie, a hop-by-hop or a security header a
    span may carry), with :data:`DATA_HEADERS`; anything a browser would render is an
    attachment."""
    headers = {**keep_headers(recorded.items(), RESPONSE_HEADERS_KEPT), **DATA_HEADERS}
    media = headers.get("content-type", "").split(";")[0].strip().lower()
    if media not in SHOWN_INLINE:
        headers["content-disposition"] = "attachment"
    return headers


def json_response(content: Any, status: int = 200,
                  headers: Mapping[str, str] | None = None) -> Response:
    """Store rows carry datetimes and raw bytes: both are written as text; recorded text in
    it is data (:data:`DATA_HEADERS`)."""
    body = json.dumps(content, default=json_default, ensure_ascii=False).encode("utf-8")
    return Response(body, status_code=status, headers={**DATA_HEADERS, **(headers or {})},
                    media_type="application/json")


def error_response(status: int, message: str,
                   headers: Mapping[str, str] | None = None, hint: str = "") -> Response:
    body = {"error": message, "hint": hint} if hint else {"error": message}
    return json_response(body, status, headers)


def error_status(error: Exception) -> int | None:
    """The status one of our errors answers with (a route that needs another one for a case
    raises HTTPException); None for anything else (a bug)."""
    if isinstance(error, HTTPException):
        return error.status_code
    return error.http_status if isinstance(error, RewindError) else None


def answer_error(error: Exception) -> Response:
    """The answer for one of our errors; anything else is a bug: :func:`internal_error`."""
    if isinstance(error, HTTPException):
        return error_response(error.status_code, str(error.detail), error.headers)
    if isinstance(error, RewindError):
        return error_response(error.http_status, str(error), hint=error.hint)
    return internal_error(error)


def _answer(request: Request, error: Exception) -> Response:
    return answer_error(error)


def internal_error(error: BaseException) -> Response:
    """A 500 for a bug: the body names an id, the log has the traceback under the same id, so
    whoever reports it can be matched with what happened."""
    error_id = logged(error)
    return json_response({"error": f"internal error (a bug in rewind), logged as {error_id}",
                          "error_id": error_id}, 500)


def logged(error: BaseException) -> str:
    """A bug logged with its traceback under a fresh id, which the answer names."""
    error_id = uuid.uuid4().hex[:16]
    log.error("internal error %s: %s: %s", error_id, type(error).__name__, error, exc_info=error)
    return error_id


def query_trace_id(request: Request, name: str) -> str:
    """The trace id in query parameter ``name``, checked as one in a path is."""
    return parse_trace_id(request.query_params.get(name, ""), f"{name}: trace id")


MAX_JSON_BYTES = 16 << 20  # a suite of ten thousand runs with their results is a few MiB
MAX_JSON_DEPTH = 32  # the deepest body a route takes (a suite's results) is 5 levels


async def json_object(request: Request) -> dict[str, Any]:
    """The request's JSON body (an object; none: ``{}``), the one way a route reads one: over
    :data:`MAX_JSON_BYTES` is a 413, anything malformed or nested past
    :data:`MAX_JSON_DEPTH` a 400 (never a 500: the input's fault)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_JSON_BYTES:
        raise HTTPException(413, f"JSON body over the {MAX_JSON_BYTES:,}-byte limit")
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > MAX_JSON_BYTES:
            raise HTTPException(413, f"JSON body over the {MAX_JSON_BYTES:,}-byte limit")
    deep = InvalidValue(f"JSON body nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        found = json.loads(bytes(raw) or b"{}")
    except RecursionError:
        raise deep from None
    except ValueError as error:
        raise InvalidValue(f"expected a JSON object: {error}") from None
    if not isinstance(found, dict):
        raise InvalidValue("expected a JSON object")
    pending: list[tuple[int, Any]] = [(1, found)]
    while pending:
        depth, value = pending.pop()
        if depth > MAX_JSON_DEPTH:
            raise deep
        items = value.values() if isinstance(value, dict) else value
        pending += [(depth + 1, v) for v in items if isinstance(v, (dict, list))]
    return found


def query_limit(request: Request, default: int, maximum: int) -> int:
    """The ``limit`` query parameter, clamped to 1..``maximum``."""
    raw = request.query_params.get("limit")
    try:
        limit = int(raw) if raw is not None else default
    except ValueError:
        raise InvalidValue(f"limit must be an integer, got {raw!r}", field="limit") from None
    return max(1, min(limit, maximum))


def route(path: str, handler: Handler, methods: list[str] | None = None,
          public: bool = False, short_ids: bool = False,
          errors: Callable[[Request, Exception], Response] | None = None) -> Route:
    """A worker route. The handler is called with the request and the caller's
    :class:`TenantView` (the app's ``state.access`` seen through the tenant in the request
    scope); a ``public`` one (health, the API description) reads no data and gets the request
    only. A ``{trace_id}`` in ``path`` reaches the handler normalised (lower case) and checked,
    so no handler sees a malformed one; with ``short_ids`` (pages people type an id into) a
    unique prefix of one of the caller's traces redirects to the whole id. ``errors`` answers
    a failure instead of :func:`answer_error` (a page's: a page for a browser). Sync handlers
    run in a thread, as Starlette runs them: they read the store."""
    is_async = inspect.iscoroutinefunction(handler)

    @functools.wraps(handler)
    async def endpoint(request: Request) -> Response:
        if public:
            args: tuple[Any, ...] = (request,)
        elif TENANT_KEY not in request.scope:  # no caller established: nothing to show
            return error_response(401, "not authenticated", {"www-authenticate": "Bearer"})
        else:
            access: StoreAccess = request.app.state.access
            args = (request, access.view(request.scope[TENANT_KEY]))
        try:
            params = request.path_params
            if TRACE_ID_PARAM in params:
                raw = params[TRACE_ID_PARAM]
                if short_ids and not public and not is_trace_id(raw):
                    return await run_in_threadpool(_to_whole_id, request, args[1], raw)
                params[TRACE_ID_PARAM] = parse_trace_id(raw)
            if is_async:
                result = await handler(*args)
            else:
                result = await run_in_threadpool(handler, *args)
        except Exception as error:
            return (errors or _answer)(request, error)
        return result if isinstance(result, Response) else json_response(result)

    return Route(path, endpoint, methods=methods)


def app_route(path: str, app: ASGIApp, methods: list[str] | None = None) -> Route:
    """A route answered by an ASGI app that speaks its own protocol (the MCP server): it gets
    the caller's :class:`TenantView` in the scope under :data:`VIEW_KEY`, and no caller, no
    call (401), as every other route."""
    return Route(path, _ScopedApp(app), methods=methods)


class _ScopedApp:
    """An ASGI app (not a function: Starlette hands it the raw scope) behind the tenant."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if TENANT_KEY not in scope:
            refused = error_response(401, "not authenticated", {"www-authenticate": "Bearer"})
            await refused(scope, receive, send)
            return
        access: StoreAccess = scope["app"].state.access
        scope[VIEW_KEY] = access.view(scope[TENANT_KEY])
        await self.app(scope, receive, send)


def _to_whole_id(request: Request, view: Any, raw: str) -> Response:
    """The same page under the whole id the prefix ``raw`` names among the caller's traces."""
    whole = resolve_trace_id(view, raw)
    head, _, tail = request.url.path.rpartition(raw)
    query = f"?{request.url.query}" if request.url.query else ""
    return RedirectResponse(f"{head}{whole}{tail}{query}", status_code=302)
