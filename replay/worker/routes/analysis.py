"""Worker API routes for comparing runs: diff, bisect, usage for stats, and run facts for
``bisect --between``. The CLI uses them while a worker holds the embedded store.

    GET /v1/diff?left=A&right=B              per-step differences (diff.TraceDiff)
    GET /v1/bisect?good=A&bad=B              first divergence and cause (bisect.Bisection)
    GET /v1/usage?since=&until=&service=&include_replays=   calls and tokens per service and
                                             model; replays and forks left out unless asked
    GET /v1/usage/traces?trace_id=A&trace_id=B   tokens, cost, unpriced and unreported calls
                                             of each trace (``suite run`` through a worker;
                                             404 when one is not the caller's)
    GET /v1/runs?since=&until=&service=&versions=a,b&limit=   one row per run
(the query parameters are those of ``filters.UsageFilters`` and ``filters.RunFilters``)
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.routing import Route

from rewind.collector.store.read.filters import RunFilters, UsageFilters, from_query
from rewind.exporter.core.errors import InvalidValue
from rewind.replay.cassette.ids import parse_trace_id
from rewind.replay.cassette.model import Cassette
from rewind.replay.timetravel.bisect import bisect
from rewind.replay.timetravel.diff import diff_runs
from rewind.replay.worker.routing import query_limit, query_trace_id, route
from rewind.replay.worker.tenancy import TenantView

MAX_RUNS = 100_000
MAX_USAGE_TRACES = 100


def routes() -> list[Route]:
    def pair(request: Request, view: TenantView, first: str,
             second: str) -> tuple[Cassette, Cassette]:
        """Both ids are checked before either trace is read: a typo is a 400, not a 404."""
        ids = [query_trace_id(request, first), query_trace_id(request, second)]
        return view.cassette(ids[0]), view.cassette(ids[1])

    def diff(request: Request, view: TenantView) -> Any:
        return diff_runs(*pair(request, view, "left", "right")).to_dict()

    def bisection(request: Request, view: TenantView) -> Any:
        return bisect(*pair(request, view, "good", "bad")).to_dict()

    def usage(request: Request, view: TenantView) -> Any:
        filters = from_query(UsageFilters, request.query_params)
        return {"usage": [u.to_dict() for u in view.usage(filters)]}

    def trace_usage(request: Request, view: TenantView) -> Any:
        asked = request.query_params.getlist("trace_id")
        if not asked or len(asked) > MAX_USAGE_TRACES:
            raise InvalidValue(f"give 1 to {MAX_USAGE_TRACES} trace_id parameters, not "
                               f"{len(asked)}")
        ids = [parse_trace_id(raw, "trace_id") for raw in asked]
        view.check_visible(ids)  # another tenant's trace is as unknown as a missing one: 404
        return {"traces": {trace_id: usage.to_dict()
                           for trace_id, usage in view.trace_usage(ids).items()}}

    def runs(request: Request, view: TenantView) -> Any:
        filters = from_query(RunFilters, request.query_params,
                             limit=query_limit(request, default=1000, maximum=MAX_RUNS))
        return {"runs": [row.to_dict() for row in view.runs(filters)]}

    return [
        route("/v1/diff", diff),
        route("/v1/bisect", bisection),
        route("/v1/usage", usage),
        route("/v1/usage/traces", trace_usage),
        route("/v1/runs", runs),
    ]
