"""Worker API routes for stored traces: list them, read one's spans, read its cassette.

    GET /v1/traces?service=&errors=&model=&q=&since=&until=&limit=   recent traces, newest
                                             first (``filters.TraceFilters``)
    GET /v1/traces/{trace_id}                every span of the trace
    GET /v1/traces/{trace_id}/cassette       the trace as a cassette (cached per version)

Suites (named sets of stored traces, ``rewind suite`` through a worker that holds the store),
the caller's tenant's:

    GET /v1/suites                           every suite's definition
    GET /v1/suites/{name}                    its definition and its runs' last results
    PUT /v1/suites/{name}                    its definition (JSON; runs the caller can see)
    DELETE /v1/suites/{name}                 removed
    POST /v1/suites/{name}/results           {"results": [...]}: what a `suite run` found
"""

from __future__ import annotations

import dataclasses
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.routing import Route

from rewind.collector.store.read.filters import TraceFilters, from_query
from rewind.exporter.core.errors import InvalidValue
from rewind.replay.suites import validate
from rewind.replay.worker.routing import json_object, query_limit, route
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
        *_suite_routes(),
    ]


def _suite_routes() -> list[Route]:
    def suites(request: Request, view: TenantView) -> Any:
        return {"suites": [s.to_dict() for s in view.suites().names().values()]}

    def suite(request: Request, view: TenantView) -> Any:
        catalog, name = view.suites(), request.path_params["name"]
        found = catalog.get(name)
        return {"suite": found.to_dict(), "last": {t: dataclasses.asdict(r) for t, r in
                                                   catalog.last_results(name).items()}}

    def save(view: TenantView, name: str, body: dict[str, Any]) -> Any:
        found = validate.definition({**body, "name": name})
        view.check_visible([r.trace_id for r in found.runs])
        view.suites().save(found)
        return {"suite": found.to_dict()}

    async def put(request: Request, view: TenantView) -> Any:
        body = await json_object(request)
        return await run_in_threadpool(save, view, request.path_params["name"], body)

    def remove(request: Request, view: TenantView) -> Any:
        view.suites().remove(request.path_params["name"])
        return {"removed": request.path_params["name"]}

    def save_results(view: TenantView, name: str, body: dict[str, Any]) -> Any:
        catalog = view.suites()
        catalog.get(name)
        results = body.get("results") or []
        if not isinstance(results, list) or not all(isinstance(r, dict) and r.get("trace_id")
                                                    for r in results):
            raise InvalidValue("results: a list of objects with a trace_id")
        view.check_visible([str(r["trace_id"]) for r in results])
        catalog.save_results(name, results)
        return {"saved": len(results)}

    async def results(request: Request, view: TenantView) -> Any:
        body = await json_object(request)
        return await run_in_threadpool(save_results, view, request.path_params["name"], body)

    return [
        route("/v1/suites", suites),
        route("/v1/suites/{name}", suite),
        route("/v1/suites/{name}", put, methods=["PUT"]),
        route("/v1/suites/{name}", remove, methods=["DELETE"]),
        route("/v1/suites/{name}/results", results, methods=["POST"]),
    ]
