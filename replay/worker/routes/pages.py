"""The web UI's routes: the pages (stable URLs Grafana links to), the JSON they draw, their
static files, and the sign-in form that puts a token in a cookie.

    GET /                          runs           GET /v1/ui/runs?service=&errors=&model=&q=&since=
    GET /traces/{trace_id}         a run          GET /v1/ui/traces/{trace_id}
                                                  GET /v1/ui/traces/{trace_id}/step?index=N
    GET /diff/{left}/{right}       two runs       GET /v1/ui/diff?left=&right=
    GET /bisect/{good}/{bad}       first split    GET /v1/ui/bisect?good=&bad=
    GET /conversations/{id}        the runs of one conversation, turn by turn (with the page)
    GET /suites                    every suite and how its last run went (with the page)
    GET /suites/{name}             a suite's runs and their last results (with the page)
    GET, POST /login               the token, kept in a cookie for the pages
    POST /logout                   the cookie forgotten (the button of a signed-in page)
    GET /ui/<file>                 scripts and style (package data)

Every page and JSON route is declared with :func:`routing.route`, so auth and the caller's
tenant apply as on the API: a page of another tenant's trace is a 404, as an unknown one is.
Trace ids in pages and their JSON may be unique prefixes (``locate.resolve_trace_id``). A
page that fails is a page for a browser (:func:`page_error`), its JSON the API's error.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import Scope

from rewind.collector.access.auth import Authenticator, AuthError
from rewind.collector.access.auth_backoff import TooManyFailures
from rewind.collector.access.request_origin import CrossOrigin
from rewind.collector.store.read.filters import TraceFilters, from_query
from rewind.exporter.core.errors import InvalidValue, RewindError
from rewind.replay.cassette.ids import parse_trace_ref
from rewind.replay.sources.locate import resolve_trace_id
from rewind.replay.suites.catalog import SuiteNotFound
from rewind.replay.suites.spec import Suite
from rewind.replay.timetravel.bisect import bisect
from rewind.replay.timetravel.diff import diff_runs, step_view
from rewind.replay.ui import assets, compare, listing, suite_view, views
from rewind.replay.worker.auth_middleware import (
    CHALLENGE,
    CSRF_FIELD,
    LOGIN_PATH,
    LOGOUT_PATH,
    OPEN,
    PAGE,
    client_address,
    cookie_token,
    csrf_token,
    form_refusal,
    route_kind,
    token_cookie,
    token_option,
    wants_page,
)
from rewind.replay.worker.routing import (
    answer_error,
    error_response,
    error_status,
    logged,
    query_limit,
    route,
)
from rewind.replay.worker.tenancy import TenantView

# (title, what the page is, the data its first screen needs or None)
PageHandler = Callable[[Request, TenantView], tuple[str, dict[str, Any], dict[str, Any] | None]]
MAX_FORM_BYTES = 8192
HEADERS = assets.PAGE_HEADERS


def page_error(request: Request, error: Exception) -> Response:
    """A page's failure: for a browser, the page saying what went wrong with the status our
    error carries (an unknown run is a 404 page; a bug, a 500 naming the id it is logged
    under); for any other client, the API's JSON error."""
    if not wants_page(request.scope):
        return answer_error(error)
    status = error_status(error)
    if status is None:
        return error_page(request, 500, f"internal error (a bug in rewind), logged as "
                                        f"{logged(error)}")
    return error_page(request, status, str(error))


def error_page(request: Request, status: int, message: str) -> Response:
    """The styled error page."""
    return _html(request, lambda sign_out: assets.error_html(status, message, sign_out), status)


def _html(request: Request, render: Callable[[str | None], str], status: int = 200) -> Response:
    """A page ``render`` writes given the CSRF token of a browser signed in by the form (its
    sign-out button; None when not), with the CSRF cookie when it had none yet."""
    csrf, set_cookie = csrf_token(request.scope)
    sign_out = csrf if cookie_token(request.scope) else None  # signed in by the form
    response = HTMLResponse(render(sign_out), status, HEADERS)
    if sign_out and set_cookie:
        response.headers.append("set-cookie", set_cookie)
    return response


def not_found(request: Request, error: Exception) -> Response:
    """A path no route serves: a 404 page for a browser opening a page, else as before."""
    if route_kind(request.url.path) == PAGE and wants_page(request.scope):
        return error_page(request, 404, f"nothing at {request.url.path}")
    return PlainTextResponse("Not Found", 404)


def refused(scope: Scope, error: RewindError) -> Response:
    """The answer to a request the guard refuses (a foreign ``Host`` or ``Origin``): a
    sign-in or sign-out form sent from another site gets the form back saying so (the browser
    shows it in place of the page it left); a browser opening a page, a short page; any other
    caller, the API's JSON error."""
    path, status = scope["path"], error.http_status
    if scope["method"] == "POST" and path in (LOGIN_PATH, LOGOUT_PATH) and \
            isinstance(error, CrossOrigin):
        verdict = "Not signed in" if path == LOGIN_PATH else "Still signed in"
        return _form_page(Request(scope), "/", f"{verdict}: {error}.", status)
    if route_kind(path) in (PAGE, OPEN) and wants_page(scope):
        # no styles or scripts of ours: under a foreign Host they would be refused too
        return HTMLResponse(f"<!doctype html><meta charset=utf-8><title>{status}</title>"
                            f"<h1>Refused</h1><p>{html.escape(str(error))}.</p>"
                            f"<p>{html.escape(error.hint)}.</p>", status, HEADERS)
    return error_response(status, str(error), hint=error.hint)


def _page(handler: PageHandler) -> Callable[[Request, TenantView], Response]:
    """A page: the shell for what ``handler`` names, after it checked the caller may see the
    traces (a handler may answer a redirect instead). Its errors are :func:`page_error`'s."""
    def endpoint(request: Request, view: TenantView) -> Response:
        answer = handler(request, view)
        if isinstance(answer, Response):
            return answer
        title, page, data = answer
        return _html(request, lambda sign_out: assets.page_html(title, page, data, sign_out))

    endpoint.__name__ = handler.__name__
    return endpoint


def _pair(request: Request, view: TenantView, first: str, second: str) -> list[str] | Response:
    """Both ids of a two-run page, each a whole id or a unique prefix of one of the caller's
    traces (a prefix redirects to the page of the whole ids), checked before either trace is
    read (a typo is a 400)."""
    raw = [request.path_params[first], request.path_params[second]]
    ids = [resolve_trace_id(view, parse_trace_ref(value, f"{name}: trace id"))
           for name, value in ((first, raw[0]), (second, raw[1]))]
    for trace_id in ids:
        view.cassette(trace_id)
    if ids != raw:
        kind = request.url.path.strip("/").split("/")[0]
        return RedirectResponse(f"/{kind}/{ids[0]}/{ids[1]}", status_code=302)
    return ids


def _query_ids(request: Request, view: TenantView, *names: str) -> list[str]:
    """Trace ids (or unique prefixes) in query parameters, resolved as a path's are."""
    return [resolve_trace_id(view, parse_trace_ref(request.query_params.get(name, ""),
                                                   f"{name}: trace id")) for name in names]


class ConversationNotFound(RewindError):
    """No run of the caller's is in that conversation."""

    http_status = 404


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
        ids = _pair(request, view, "left", "right")
        return ids if isinstance(ids, Response) else ("Diff", {"page": "diff", "ids": ids}, None)

    def bisection(request: Request, view: TenantView) -> Any:
        ids = _pair(request, view, "good", "bad")
        return ids if isinstance(ids, Response) else (
            "Bisect", {"page": "bisect", "ids": ids}, None)

    def conversation(request: Request, view: TenantView) -> Any:
        """The runs of a conversation come with the page, one turn each."""
        name = request.path_params["conversation_id"]
        turns = view.conversation(name)
        if not turns:
            raise ConversationNotFound(f"conversation {name!r} not found")
        return (f"Conversation {name[:24]}", {"page": "conversation", "ids": [name]},
                listing.turn_entries(name, turns))

    def suite(request: Request, view: TenantView) -> Any:
        """The suite and its last results come with the page."""
        name = request.path_params["name"]
        definition, last = view.suite(name)
        if definition is None:
            raise SuiteNotFound(f"no suite named {name!r}")
        data = suite_view.suite_view(Suite.from_dict(json.loads(definition)), last)
        return f"Suite {name}", {"page": "suite", "ids": [name]}, data

    def suites(request: Request, view: TenantView) -> Any:
        """Every suite and how its last run went come with the page."""
        catalog = view.suites()
        found = catalog.names()
        data = suite_view.suites_index(found, {n: catalog.last_results(n) for n in found})
        return "Suites", {"page": "suites", "ids": []}, data

    return [
        route("/", _page(runs), errors=page_error),
        route("/suites", _page(suites), errors=page_error),
        route("/suites/{name}", _page(suite), errors=page_error),
        route("/traces/{trace_id}", _page(trace), short_ids=True, errors=page_error),
        route("/diff/{left}/{right}", _page(diff), errors=page_error),
        route("/bisect/{good}/{bad}", _page(bisection), errors=page_error),
        route("/conversations/{conversation_id}", _page(conversation), errors=page_error),
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
        ids = _query_ids(request, view, "left", "right")
        return compare.diff_view(diff_runs(view.cassette(ids[0]), view.cassette(ids[1])))

    def bisection(request: Request, view: TenantView) -> Any:
        ids = _query_ids(request, view, "good", "bad")
        good, bad = view.cassette(ids[0]), view.cassette(ids[1])
        found = bisect(good, bad)
        return compare.bisect_view(found, step_view(good, found.good_step),
                                   step_view(bad, found.bad_step))

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
    response = HTMLResponse(assets.login_html(target, message, csrf,
                                              option=token_option(request.scope)), status,
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
