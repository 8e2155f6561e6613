"""The worker's HTTP API (JSON): traces, spans and cassettes, read from the store."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from rewind.collector import reader
from rewind.collector.store import Store

from .cassette import CassetteError, build_cassette


def _default(value: Any) -> Any:
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


class Json(JSONResponse):
    def render(self, content: Any) -> bytes:
        return json.dumps(content, default=_default, ensure_ascii=False).encode("utf-8")


def _error(status: int, message: str) -> Response:
    return Json({"error": message}, status_code=status)


def _normalise_trace_id(raw: str) -> str | None:
    value = raw.strip().lower()
    if len(value) != 32 or any(c not in "0123456789abcdef" for c in value):
        return None
    return value


def create_app(store: Store) -> Starlette:
    def health(request: Request) -> Response:
        return Json({"status": "ok", "store": "embedded" if store.embedded else "server"})

    def traces(request: Request) -> Response:
        query = request.query_params
        try:
            limit = int(query.get("limit", "50"))
        except ValueError:
            return _error(400, f"limit must be an integer, got {query.get('limit')!r}")
        rows = reader.list_traces(
            store,
            service=query.get("service") or None,
            errors_only=query.get("errors") in ("1", "true"),
            limit=max(1, min(limit, 10_000)),
        )
        return Json({"traces": rows})

    def _spans(request: Request) -> tuple[str, list[dict[str, Any]]] | Response:
        trace_id = _normalise_trace_id(request.path_params["trace_id"])
        if trace_id is None:
            return _error(
                400, f"trace id must be 32 hex characters, got {request.path_params['trace_id']!r}"
            )
        spans = reader.get_trace(store, trace_id)
        if not spans:
            return _error(404, f"trace {trace_id} not found in the store")
        return trace_id, spans

    def trace(request: Request) -> Response:
        found = _spans(request)
        if isinstance(found, Response):
            return found
        return Json({"trace_id": found[0], "spans": found[1]})

    def cassette(request: Request) -> Response:
        found = _spans(request)
        if isinstance(found, Response):
            return found
        try:
            built = build_cassette(*found)
        except CassetteError as error:
            return _error(422, f"trace {found[0]}: {error}")
        return Json(built.to_dict())

    return Starlette(
        routes=[
            Route("/health", health),
            Route("/v1/traces", traces),
            Route("/v1/traces/{trace_id}", trace),
            Route("/v1/traces/{trace_id}/cassette", cassette),
        ]
    )
