"""Worker API routes for comparing runs: diff, bisect, usage for stats, and run facts for
``bisect --between``. The CLI uses them while a worker holds the embedded store.

    GET /v1/diff?left=A&right=B              per-step differences (diff.TraceDiff)
    GET /v1/bisect?good=A&bad=B              first divergence and cause (bisect.Bisection)
    GET /v1/usage?since=&until=&service=     calls and tokens per service and model
    GET /v1/runs?since=&until=&service=&versions=a,b&limit=   one row per run
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from rewind.collector import reader
from rewind.collector.store import Store
from rewind.replay.cassette.model import Cassette, CassetteError, build_cassette
from rewind.replay.timetravel.bisect import bisect
from rewind.replay.timetravel.diff import diff_runs
from rewind.replay.timetravel.runs import run_rows
from rewind.replay.timetravel.stats import parse_when, usage_from_store
from rewind.replay.worker.cache import TraceNotFound, normalise_trace_id


def _json(content: Any, status: int = 200) -> Response:
    def default(value: Any) -> Any:
        if isinstance(value, (dt.datetime, dt.date)):
            return value.isoformat()
        raise TypeError(f"not JSON serialisable: {type(value).__name__}")

    body = json.dumps(content, default=default, ensure_ascii=False).encode("utf-8")
    return Response(body, status_code=status, media_type="application/json")


def routes(store: Store) -> list[Route]:
    def cassette(request: Request, name: str) -> Cassette:
        raw = request.query_params.get(name, "")
        trace_id = normalise_trace_id(raw)
        if trace_id is None:
            raise ValueError(f"{name}: trace id must be 32 hex characters, got {raw!r}")
        spans = reader.get_trace(store, trace_id)
        if not spans:
            raise TraceNotFound(trace_id)
        return build_cassette(trace_id, spans)

    def guarded(handler: Any) -> Any:
        def run(request: Request) -> Response:
            try:
                return _json(handler(request))
            except TraceNotFound as error:
                return _json({"error": str(error)}, 404)
            except CassetteError as error:
                return _json({"error": str(error)}, 422)
            except ValueError as error:
                return _json({"error": str(error)}, 400)

        return run

    def diff(request: Request) -> Any:
        return diff_runs(cassette(request, "left"), cassette(request, "right")).to_dict()

    def bisection(request: Request) -> Any:
        return bisect(cassette(request, "good"), cassette(request, "bad")).to_dict()

    def period(request: Request) -> dict[str, Any]:
        query = request.query_params
        return {"since": parse_when(query.get("since")), "until": parse_when(query.get("until")),
                "service": query.get("service") or None}

    def usage(request: Request) -> Any:
        return {"usage": [u.to_dict() for u in usage_from_store(store, **period(request))]}

    def runs(request: Request) -> Any:
        query = request.query_params
        try:
            limit = max(1, min(int(query.get("limit", "1000")), 100_000))
        except ValueError:
            raise ValueError(f"limit must be an integer, got {query.get('limit')!r}") from None
        versions = [v for v in (query.get("versions") or "").split(",") if v]
        return {"runs": run_rows(store, versions=versions, limit=limit, **period(request))}

    return [
        Route("/v1/diff", guarded(diff)),
        Route("/v1/bisect", guarded(bisection)),
        Route("/v1/usage", guarded(usage)),
        Route("/v1/runs", guarded(runs)),
    ]
