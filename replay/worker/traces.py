"""Worker API routes for stored traces: list them, read one's spans, read its cassette.

    GET /v1/traces?service=&errors=&limit=   recent traces, newest first
    GET /v1/traces/{trace_id}                every span of the trace
    GET /v1/traces/{trace_id}/cassette       the trace as a cassette (cached per version)
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.routing import Route

from rewind.collector import reader
from rewind.collector.store import Store
from rewind.replay.worker.cache import CassetteCache, trace_spans
from rewind.replay.worker.routing import query_limit, route

MAX_LIMIT = 10_000


def routes(store: Store, cassettes: CassetteCache) -> list[Route]:
    def list_traces(request: Request) -> Any:
        query = request.query_params
        rows = reader.list_traces(
            store,
            service=query.get("service") or None,
            errors_only=query.get("errors") in ("1", "true"),
            limit=query_limit(request, default=50, maximum=MAX_LIMIT),
        )
        return {"traces": rows}

    def trace(request: Request) -> Any:
        trace_id = request.path_params["trace_id"]
        return {"trace_id": trace_id, "spans": trace_spans(store, trace_id)}

    def cassette(request: Request) -> Any:
        return cassettes.get(request.path_params["trace_id"]).to_dict()

    return [
        route("/v1/traces", list_traces),
        route("/v1/traces/{trace_id}", trace),
        route("/v1/traces/{trace_id}/cassette", cassette),
    ]
