"""The runs page's data: recent traces with their calls, tokens, cost and duration, filtered
by service, errors, model and text said anywhere in them, and the runs made from a run (forks
and replays, by their lineage attributes), each read with the caller's tenant.

Two queries per listing: the trace listing's own (``reader.list_traces``, on
``rewind_traces``), or with a model or text filter one over ``otel_traces`` grouped by trace;
then one over ``rewind_llm_costs`` for the model, tokens and cost of the traces found (the one
call table, shadows left out, priced by the price table).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from rewind.collector.llm_steps import LLM_CALLS_IN_TRACE
from rewind.collector.reader import list_traces, tenant_condition
from rewind.collector.schema import LLM_COSTS, TRACES, span_attribute
from rewind.collector.store import Store
from rewind.exporter import attributes as A

MAX_RUNS = 1000
_FORK = span_attribute(A.FORK_SOURCE_TRACE_ID)
_REPLAY = span_attribute(A.REPLAY_SOURCE_TRACE_ID)
_MODELS = (span_attribute(A.RESPONSE_MODEL), span_attribute(A.REQUEST_MODEL))


def run_rows(store: Store, tenant: str | None, service: str | None = None,
             errors_only: bool = False, model: str | None = None, text: str | None = None,
             since: datetime | None = None, limit: int = 100) -> list[dict[str, Any]]:
    """One row per trace started after ``since``, newest first, with its lineage (``Source``,
    ``Kind``), model, tokens and cost. Without a model or text filter the rows are the trace
    listing's (``reader.list_traces``, on ``rewind_traces``); those filters look into the
    spans themselves. ``limit`` comes clamped to ``MAX_RUNS`` by the route."""
    if model or text:
        rows = _searched(store, tenant, service, errors_only, model, text, since, limit)
    else:
        rows = list_traces(store, service=service, since=since, errors_only=errors_only,
                           limit=limit, tenant=tenant)
    usage = _usage(store, [r["TraceId"] for r in rows], tenant)
    for row in rows:
        row.update(usage.get(row["TraceId"], {"InputTokens": 0, "OutputTokens": 0,
                                              "CostUsd": 0.0, "Unpriced": 0, "Model": ""}))
        row["Source"] = row["ForkSource"] or row["ReplaySource"] or None
        row["Kind"] = "fork" if row["ForkSource"] else "replay" if row["ReplaySource"] else None
    return rows


def _searched(store: Store, tenant: str | None, service: str | None, errors_only: bool,
              model: str | None, text: str | None, since: datetime | None,
              limit: int) -> list[dict[str, Any]]:
    """The listing filtered by a model or by text said anywhere in a run: spans grouped by
    trace, their attribute maps read."""
    params: dict[str, Any] = {"limit": limit}
    where = ["TraceId != ''", tenant_condition(tenant, params)]
    if since:
        where.append("Timestamp >= {since:DateTime64(9)}")
        params["since"] = since
    if service:
        where.append("ServiceName = {service:String}")
        params["service"] = service
    having = []
    if errors_only:
        having.append("Errors > 0")
    if model:
        having.append(f"countIf({_MODELS[0]} = {{model:String}} "
                      f"OR {_MODELS[1]} = {{model:String}}) > 0")
        params["model"] = model
    if text:
        having.append("countIf(arrayExists(v -> positionCaseInsensitiveUTF8(v, {text:String}) "
                      "> 0, mapValues(SpanAttributes))) > 0")
        params["text"] = text
    return store.query(f"""
SELECT
    TraceId,
    argMin(SpanName, if(ParentSpanId = '', 0, 1) * 1e18 + toUnixTimestamp64Nano(Timestamp))
        AS RootSpan,
    any(ServiceName) AS Service,
    min(Timestamp) AS Start,
    (max(toUnixTimestamp64Nano(Timestamp) + Duration) - min(toUnixTimestamp64Nano(Timestamp)))
        AS DurationNs,
    count() AS Spans,
    {LLM_CALLS_IN_TRACE} AS LlmCalls,
    countIf(StatusCode = 'STATUS_CODE_ERROR') AS Errors,
    anyIf({_FORK}, {_FORK} != '') AS ForkSource,
    anyIf({_REPLAY}, {_REPLAY} != '') AS ReplaySource
FROM {TRACES}
WHERE {' AND '.join(where)}
GROUP BY TraceId
{'HAVING ' + ' AND '.join(having) if having else ''}
ORDER BY Start DESC
LIMIT {{limit:UInt32}}
""", params)


def _usage(store: Store, trace_ids: Sequence[str],
           tenant: str | None) -> dict[str, dict[str, Any]]:
    """Tokens, cost and first model per trace, counting only ``tenant``'s spans."""
    if not trace_ids:
        return {}
    params: dict[str, Any] = {"ids": list(trace_ids)}
    mine = ("1" if tenant is None else
            f"SpanId IN (SELECT SpanId FROM {TRACES} WHERE TraceId IN {{ids:Array(String)}} "
            f"AND {tenant_condition(tenant, params)})")
    rows = store.query(f"""
SELECT TraceId, sum(InputTokens) AS InputTokens, sum(OutputTokens) AS OutputTokens,
    sum(CostUsd) AS CostUsd, countIf(PricedAs = '') AS Unpriced,
    argMin(if(ResponseModel != '', ResponseModel, RequestModel), Timestamp) AS Model
FROM {LLM_COSTS}
WHERE TraceId IN {{ids:Array(String)}} AND {mine}
GROUP BY TraceId
""", params)
    return {r.pop("TraceId"): r for r in rows}


def derived_runs(store: Store, trace_id: str, tenant: str | None) -> list[dict[str, Any]]:
    """Forks and replays of ``trace_id`` the caller may see, oldest first."""
    params: dict[str, Any] = {"source": trace_id}
    return store.query(f"""
SELECT TraceId, min(Timestamp) AS Start,
    if(countIf({_FORK} = {{source:String}}) > 0, 'fork', 'replay') AS Kind,
    anyIf({span_attribute(A.FORK_STEP)}, {_FORK} = {{source:String}}) AS Step,
    anyIf({span_attribute(A.FORK_EDITS)}, {_FORK} = {{source:String}}) AS Edits
FROM {TRACES}
WHERE ({_FORK} = {{source:String}} OR {_REPLAY} = {{source:String}})
    AND TraceId != {{source:String}} AND {tenant_condition(tenant, params)}
GROUP BY TraceId
ORDER BY Start
""", params)


def nest(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Runs made from a listed run go under it (``Derived``); the others stay at the top."""
    listed = {r["TraceId"] for r in rows}
    top: list[dict[str, Any]] = []
    children: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        entry = {**row, "Derived": []}
        source = row.get("Source")
        if source and source in listed and source != row["TraceId"]:
            children.setdefault(source, []).append(entry)
        else:
            top.append(entry)

    def attach(entry: dict[str, Any], depth: int) -> dict[str, Any]:
        if depth < 20:
            entry["Derived"] = [attach(c, depth + 1)
                                for c in children.get(entry["TraceId"], [])]
        return entry

    return [attach(entry, 0) for entry in top]
