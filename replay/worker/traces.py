"""Worker API routes for stored traces: list them, read one's spans, read its cassette.

    GET /v1/traces?service=&errors=&model=&q=&since=&until=&limit=   recent traces, newest
                                             first (``filters.TraceFilters``)
    GET /v1/traces/{trace_id}                every span of the trace
    GET /v1/traces/{trace_id}/cassette       the trace as a cassette (cached per version)
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.routing import Route

from rewind.collector.filters import TraceFilters, from_query
from rewind.replay.worker.routing import query_limit, route
from rewind.replay.worker.tenancy import TenantView

MAX_LIMIT = 10_000


def routes() -> list[Route]:
    def list_traces(request: Request, view: TenantView) -> Any:
        filters = from_query(TraceFilters, request.query_params,
                             limit=query_limit(request, default=50, maximum=MAX_LIMIT))
        return {"traces": [row.to_dict() for row in view.traces(filters)]}

    def trace(request: Request, view: TenantView) -> Any:
        trace_id = request.path_params["trace_id"]
        return {"trace_id": trace_id, "spans": view.spans(trace_id)}

    def cassette(request: Request, view: TenantView) -> Any:
        return view.cassette(request.path_params["trace_id"]).to_dict()

    return [
        route("/v1/traces", list_traces),
        route("/v1/traces/{trace_id}", trace),
        route("/v1/traces/{trace_id}/cassette", cassette),
    ]
