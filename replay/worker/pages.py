"""The web UI's routes: the pages (stable URLs Grafana links to), the JSON they draw, their
static files, and the sign-in form that puts a token in a cookie.

    GET /                          runs           GET /v1/ui/runs?service=&errors=&model=&q=&since=
    GET /traces/{trace_id}         a run          GET /v1/ui/traces/{trace_id}
                                                  GET /v1/ui/traces/{trace_id}/step?index=N
    GET /diff/{left}/{right}       two runs       GET /v1/ui/diff?left=&right=
    GET /bisect/{good}/{bad}       first split    GET /v1/ui/bisect?good=&bad=
    GET /suites/{name}             a suite's runs and their last results (with the page)
    GET, POST /login               the token, kept in a cookie for the pages
    POST /logout                   the cookie forgotten (the button of a signed-in page)
    GET /ui/<file>                 scripts and style (package data)

Every page and JSON route is declared with :func:`routing.route`, so auth and the caller's
tenant apply as on the API: a page of another tenant's trace is a 404, as an unknown one is.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from rewind.collector.auth import Authenticator, AuthError
from rewind.collector.auth_backoff import TooManyFailures
from rewind.collector.filters import TraceFilters, from_query
from rewind.exporter.errors import InvalidValue
from rewind.replay.cassette.ids import parse_trace_id
from rewind.replay.suites.catalog import SuiteNotFound
from rewind.replay.suites.spec import Suite
from rewind.replay.timetravel.bisect import bisect
from rewind.replay.timetravel.diff import diff_runs
from rewind.replay.ui import assets, compare, listing, suite_view, views
from rewind.replay.worker.auth_middleware import (
    CHALLENGE,
    CSRF_FIELD,
    LOGIN_PATH,
    LOGOUT_PATH,
    PAGE,
    client_address,
    cookie_token,
    csrf_token,
    form_refusal,
    route_kind,
    token_cookie,
    wants_page,
)
from rewind.replay.worker.routing import (
    error_status,
    query_limit,
    query_trace_id,
    route,
)
from rewind.replay.worker.tenancy import TenantView

# (title, what the page is, the data its first screen needs or None)
PageHandler = Callable[[Request, TenantView], tuple[str, dict[str, Any], dict[str, Any] | None]]
MAX_FORM_BYTES = 8192
HEADERS = assets.PAGE_HEADERS


def _page(handler: PageHandler) -> Callable[[Request, TenantView], Response]:
    """A page: the shell for what ``handler`` names, after it checked the caller may see the
    traces. Our errors answer with their status: a page for a browser, the API's JSON error
    for any other client."""
    def endpoint(request: Request, view: TenantView) -> Response:
        csrf, set_cookie = csrf_token(request.scope)
        sign_out = csrf if cookie_token(request.scope) else None  # signed in by the form
        try:
            title, page, data = handler(request, view)
        except Exception as error:
            status = error_status(error)
            if status is None or not wants_page(request.scope):
                raise
            response = HTMLResponse(assets.error_html(status, str(error), sign_out), status,
                                    HEADERS)
        else:
            response = HTMLResponse(assets.page_html(title, page, data, sign_out),
                                    headers=HEADERS)
        if sign_out and set_cookie:
            response.headers.append("set-cookie", set_cookie)
        return response

    endpoint.__name__ = handler.__name__
    return endpoint


def _pair(request: Request, view: TenantView, first: str, second: str) -> list[str]:
    """Both ids of a two-run page, checked before either trace is read (a typo is a 400)."""
    ids = [parse_trace_id(request.path_params[first], f"{first}: trace id"),
           parse_trace_id(request.path_params[second], f"{second}: trace id")]
    for trace_id in ids:
        view.cassette(trace_id)
    return ids


def page_routes() -> list[Route]:
    def runs(request: Request, view: TenantView) -> Any:
        return "Runs", {"page": "runs"}, None

    def trace(request: Request, view: TenantView) -> Any:
        """The outline and the first step come with the page: its first screen needs them."""
        trace_id = request.path_params["trace_id"]
        timeline = view.timeline(trace_id)
        first = (timeline.steps or timeline.events)[0].index
        data = {"trace": views.run_view(timeline, _derived(view, trace_id)),
                "steps": {str(first): views.step_detail(timeline, first)}}
        return f"Run {trace_id[:12]}", {"page": "trace", "ids": [trace_id]}, data

    def diff(request: Request, view: TenantView) -> Any:
        return "Diff", {"page": "diff", "ids": _pair(request, view, "left", "right")}, None

    def bisection(request: Request, view: TenantView) -> Any:
        return "Bisect", {"page": "bisect", "ids": _pair(request, view, "good", "bad")}, None

    def suite(request: Request, view: TenantView) -> Any:
        """The suite and its last results come with the page."""
        name = request.path_params["name"]
        definition, last = view.suite(name)
        if definition is None:
            raise SuiteNotFound(f"no suite named {name!r}")
        data = suite_view.suite_view(Suite.from_dict(json.loads(definition)), last)
        return f"Suite {name}", {"page": "suite", "ids": [name]}, data

    return [
        route("/", _page(runs)),
        route("/suites/{name}", _page(suite)),
        route("/traces/{trace_id}", _page(trace), short_ids=True),
        route("/diff/{left}/{right}", _page(diff)),
        route("/bisect/{good}/{bad}", _page(bisection)),
    ]


def _derived(view: TenantView, trace_id: str) -> list[dict[str, Any]]:
    """The runs made from a run, as the trace page's JSON."""
    return [run.to_dict() for run in view.derived_runs(trace_id)]


def data_routes() -> list[Route]:
    def runs(request: Request, view: TenantView) -> Any:
        filters = from_query(TraceFilters, request.query_params,
                             limit=query_limit(request, default=100, maximum=listing.MAX_RUNS))
        return {"runs": listing.nest(view.run_listing(filters))}

    def trace(request: Request, view: TenantView) -> Any:
        trace_id = request.path_params["trace_id"]
        return views.run_view(view.timeline(trace_id), _derived(view, trace_id))

    def step(request: Request, view: TenantView) -> Any:
        timeline = view.timeline(request.path_params["trace_id"])
        raw = request.query_params.get("index")
        if raw is None:
            return views.step_detail(timeline, (timeline.steps or timeline.events)[0].index)
        try:
            index = int(raw)
        except ValueError:
            raise InvalidValue(f"index must be an event number, got {raw!r}") from None
        return views.step_detail(timeline, index)

    def diff(request: Request, view: TenantView) -> Any:
        ids = [query_trace_id(request, "left"), query_trace_id(request, "right")]
        return compare.diff_view(diff_runs(view.cassette(ids[0]), view.cassette(ids[1])))

    def bisection(request: Request, view: TenantView) -> Any:
        ids = [query_trace_id(request, "good"), query_trace_id(request, "bad")]
        return compare.bisect_view(bisect(view.cassette(ids[0]), view.cassette(ids[1])))

    return [
        route("/v1/ui/runs", runs),
        route("/v1/ui/traces/{trace_id}", trace),
        route("/v1/ui/traces/{trace_id}/step", step),
        route("/v1/ui/diff", diff),
        route("/v1/ui/bisect", bisection),
    ]


def _next(value: str) -> str:
    """Where to go after signing in: a page of this worker only (never a recorded answer
    under ``/replay/``, an API route or another site)."""
    path = value.split("?", 1)[0].split("#", 1)[0]
    if value.startswith("/") and not value.startswith(("//", "/\\")) and \
            route_kind(path) == PAGE:
        return value
    return "/"


def _form_page(request: Request, target: str, message: str = "", status: int = 200,
               headers: dict[str, str] | None = None) -> Response:
    """The sign-in form, with this browser's CSRF token (and its cookie when it had none)."""
    csrf, set_cookie = csrf_token(request.scope)
    response = HTMLResponse(assets.login_html(target, message, csrf), status,
                            {**HEADERS, **(headers or {})})
    if set_cookie:
        response.headers.append("set-cookie", set_cookie)
    return response


async def _form_fields(request: Request) -> dict[str, str] | None:
    """A posted form's fields (the first value of each); None when it is too large."""
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            return None
    return {name: values[0] for name, values in parse_qs(body.decode("utf-8", "replace")).items()}


def login_routes(authenticator: Authenticator | None) -> list[Route]:
    def form(request: Request) -> Response:
        return _form_page(request, _next(request.query_params.get("next", "/")))

    async def sign_in(request: Request) -> Response:
        fields = await _form_fields(request)
        if fields is None:
            return _form_page(request, "/", "That form is too large.", 413)
        token = fields.get("token", "").strip()
        target = _next(fields.get("next", "/"))
        refused = form_refusal(request.scope, fields.get(CSRF_FIELD, ""))
        if refused is not None:
            return _form_page(request, target, f"Not signed in: {refused}.", 403)
        if authenticator is not None:
            try:
                authenticator.check(f"Bearer {token}", client_address(request.scope))
            except TooManyFailures as error:
                return _form_page(request, target, f"{error}.", 429,
                                  {"retry-after": str(error.retry_after)})
            except AuthError:
                return _form_page(request, target, "Unknown token.", 401, CHALLENGE)
        response = RedirectResponse(target, status_code=303)
        response.headers["set-cookie"] = token_cookie(token, request.url.scheme == "https")
        return response

    async def sign_out(request: Request) -> Response:
        fields = await _form_fields(request)
        refused = form_refusal(request.scope, (fields or {}).get(CSRF_FIELD, ""))
        if refused is not None:
            return _form_page(request, "/", f"Still signed in: {refused}.", 403)
        response = RedirectResponse(LOGIN_PATH, status_code=303)
        response.headers["set-cookie"] = token_cookie("", request.url.scheme == "https")
        return response

    return [route(LOGIN_PATH, form, public=True),
            route(LOGIN_PATH, sign_in, methods=["POST"], public=True),
            route(LOGOUT_PATH, sign_out, methods=["POST"], public=True)]


def static_routes() -> list[Route]:
    def serve(name: str) -> Callable[[Request], Response]:
        def asset(request: Request) -> Response:
            return Response(assets.static_text(name), media_type=assets.media_type(name),
                            headers={"cache-control": "no-cache",
                                     "x-content-type-options": "nosniff"})
        asset.__name__ = f"static_{name.replace('.', '_')}"
        return asset

    return [route(assets.STATIC_PREFIX + name, serve(name), public=True)
            for name in assets.STATIC_FILES]


def routes(authenticator: Authenticator | None) -> list[Route]:
    return [*page_routes(), *data_routes(), *login_routes(authenticator), *static_routes()]
