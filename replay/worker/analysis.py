"""Worker API routes for comparing runs: diff, bisect, usage for stats, and run facts for
``bisect --between``. The CLI uses them while a worker holds the embedded store.

    GET /v1/diff?left=A&right=B              per-step differences (diff.TraceDiff)
    GET /v1/bisect?good=A&bad=B              first divergence and cause (bisect.Bisection)
    GET /v1/usage?since=&until=&service=&include_replays=   calls and tokens per service and
                                             model; replays and forks left out unless asked
    GET /v1/runs?since=&until=&service=&versions=a,b&limit=   one row per run
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.routing import Route

from rewind.replay.cassette.model import Cassette
from rewind.replay.timetravel.bisect import bisect
from rewind.replay.timetravel.diff import diff_runs
from rewind.replay.timetravel.stats import parse_when
from rewind.replay.worker.routing import query_flag, query_limit, query_trace_id, route
from rewind.replay.worker.tenancy import TenantView

MAX_RUNS = 100_000


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

    def period(request: Request) -> dict[str, Any]:
        query = request.query_params
        return {"since": parse_when(query.get("since"), flag="since"),
                "until": parse_when(query.get("until"), flag="until"),
                "service": query.get("service") or None}

    def usage(request: Request, view: TenantView) -> Any:
        every = query_flag(request, "include_replays")
        return {"usage": [u.to_dict() for u in view.usage(include_replays=every,
                                                          **period(request))]}

    def runs(request: Request, view: TenantView) -> Any:
        limit = query_limit(request, default=1000, maximum=MAX_RUNS)
        versions = [v for v in (request.query_params.get("versions") or "").split(",") if v]
        return {"runs": view.runs(versions=versions, limit=limit, **period(request))}

    return [
        route("/v1/diff", diff),
        route("/v1/bisect", bisection),
        route("/v1/usage", usage),
        route("/v1/runs", runs),
    ]
