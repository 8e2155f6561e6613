"""The worker's HTTP API (JSON): traces, spans, cassettes and replay over HTTP."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from rewind.collector import reader
from rewind.collector.store import Store
from rewind.replay.cassette.model import CassetteError
from rewind.replay.worker.analysis import routes as analysis_routes
from rewind.replay.worker.archives import routes as archive_routes
from rewind.replay.worker.auth import BearerAuth
from rewind.replay.worker.cache import CassetteCache, TraceNotFound, normalise_trace_id
from rewind.replay.worker.openapi import openapi_document
from rewind.replay.worker.sessions import Sessions, replay_routes


def _default(value: Any) -> Any:
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


class Json(JSONResponse):
    def render(self, content: Any) -> bytes:
        return json.dumps(content, default=_default, ensure_ascii=False).encode("utf-8")


def error_response(status: int, message: str) -> Response:
    return Json({"error": message}, status_code=status)


def _bad_trace_id(raw: str) -> Response:
    return error_response(400, f"trace id must be 32 hex characters, got {raw!r}")


def create_app(store: Store, tokens: dict[str, str | None] | None = None) -> Starlette:
    """``tokens``: when given, every path but /health and /openapi.json needs one of them."""
    cache = CassetteCache(store)

    def load_cassette(raw_id: str) -> Any:
        trace_id = normalise_trace_id(raw_id)
        if trace_id is None:
            raise ValueError(f"trace id must be 32 hex characters, got {raw_id!r}")
        return cache.get(trace_id)

    def on_error(error: Exception) -> Response:
        if isinstance(error, TraceNotFound):
            return error_response(404, str(error))
        if isinstance(error, (ValueError, CassetteError)):
            return error_response(400 if isinstance(error, ValueError) else 422, str(error))
        raise error

    def health(request: Request) -> Response:
        return Json({"status": "ok", "store": "embedded" if store.embedded else "server"})

    def openapi(request: Request) -> Response:
        return Json(openapi_document())

    def traces(request: Request) -> Response:
        query = request.query_params
        try:
            limit = int(query.get("limit", "50"))
        except ValueError:
            return error_response(400, f"limit must be an integer, got {query.get('limit')!r}")
        rows = reader.list_traces(
            store,
            service=query.get("service") or None,
            errors_only=query.get("errors") in ("1", "true"),
            limit=max(1, min(limit, 10_000)),
        )
        return Json({"traces": rows})

    def trace(request: Request) -> Response:
        raw = request.path_params["trace_id"]
        trace_id = normalise_trace_id(raw)
        if trace_id is None:
            return _bad_trace_id(raw)
        spans = reader.get_trace(store, trace_id)
        if not spans:
            return error_response(404, str(TraceNotFound(trace_id)))
        return Json({"trace_id": trace_id, "spans": spans})

    def cassette(request: Request) -> Response:
        try:
            return Json(load_cassette(request.path_params["trace_id"]).to_dict())
        except Exception as error:
            return on_error(error)

    routes: list[BaseRoute] = [
        Route("/health", health),
        Route("/openapi.json", openapi),
        Route("/v1/traces", traces),
        Route("/v1/traces/{trace_id}", trace),
        Route("/v1/traces/{trace_id}/cassette", cassette),
        *replay_routes(Sessions(load_cassette), on_error),
        *archive_routes(store),
        *analysis_routes(store),
    ]
    middleware = [Middleware(BearerAuth, tokens=tokens)] if tokens else []
    app = Starlette(routes=routes, middleware=middleware)
    app.state.cassettes = cache
    return app
