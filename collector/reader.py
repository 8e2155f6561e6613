"""Reads traces back: one trace's spans and trace listings, through ``rewind_traces`` (one row
per trace, see ``migrations``), so no read goes through every span's attribute map.

Every read takes ``tenant``: given, only spans stamped with that tenant (resource attribute
``rewind.tenant``, set by the collector from the sender's token) are seen, so another tenant's
trace reads as unknown; None reads every tenant (an operator, or a store without auth)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from rewind.exporter import attributes as A

from .llm_steps import MADE_FROM_RUN, calls_counted
from .schema import TRACE_LIST, TRACES, span_attribute
from .store import Store

SPAN_SELECT = f"""
SELECT
    toUnixTimestamp64Nano(Timestamp) AS StartNs,
    TraceId, SpanId, ParentSpanId, TraceState, SpanName, SpanKind, ServiceName,
    ResourceAttributes, ScopeName, ScopeVersion, SpanAttributes, Duration,
    StatusCode, StatusMessage,
    arrayMap(t -> toUnixTimestamp64Nano(t), Events.Timestamp) AS EventTimesNs,
    Events.Name AS EventNames, Events.Attributes AS EventAttributes,
    Links.TraceId AS LinkTraceIds, Links.SpanId AS LinkSpanIds,
    Links.TraceState AS LinkTraceStates, Links.Attributes AS LinkAttributes
FROM {TRACES}
"""


def tenant_condition(tenant: str | None, params: dict[str, Any]) -> str:
    """The SQL condition keeping ``tenant``'s spans (adds its parameters to ``params``); a
    condition that always holds when ``tenant`` is None."""
    if tenant is None:
        return "1"
    params.update(tenant_key=A.TENANT, tenant=tenant)
    return "ResourceAttributes[{tenant_key:String}] = {tenant:String}"


def get_trace(store: Store, trace_id: str, tenant: str | None = None) -> list[dict[str, Any]]:
    """All spans of a trace, oldest first; empty when the trace is unknown.

    ``rewind_traces`` narrows the scan to the trace's time range (as Grafana's trace view does
    with the lookup table) and to its services: ``otel_traces`` is sorted by service, span name
    and time, so of the spans stored in that time range (interleaved with other traces), only
    the granules of the trace's own services are read, bodies included."""
    trace_id = trace_id.strip().lower()
    params: dict[str, Any] = {"tid": trace_id}
    return store.query(
        f"""
WITH (SELECT (min(Start), max(End)) FROM {TRACE_LIST} WHERE TraceId = {{tid:String}}) AS bounds
{SPAN_SELECT}
WHERE TraceId = {{tid:String}}
  AND ServiceName IN (SELECT ServiceName FROM {TRACE_LIST} WHERE TraceId = {{tid:String}})
  AND toDateTime(Timestamp) >= toDateTime(bounds.1)
  AND toDateTime(Timestamp) <= toDateTime(fromUnixTimestamp64Nano(bounds.2))
  AND {tenant_condition(tenant, params)}
ORDER BY Timestamp, SpanId""",
        params,
    )


def trace_version(store: Store, trace_id: str,
                  tenant: str | None = None) -> tuple[int, int] | None:
    """(span count, latest span end in ns): changes whenever spans are added to a trace. One
    lookup by trace id in ``rewind_traces``."""
    params: dict[str, Any] = {"tid": trace_id}
    where = _trace_list_filters(tenant, None, params)
    row = store.query(
        f"SELECT sum(Spans) AS n, max(End) AS last FROM {TRACE_LIST} "
        f"WHERE TraceId = {{tid:String}} AND {where}", params)[0]
    return (row["n"], row["last"]) if row["n"] else None


def trace_ids_with_prefix(store: Store, prefix: str, tenant: str | None = None,
                          limit: int = 100) -> list[str]:
    """Stored trace ids starting with ``prefix`` (at most ``limit``), of ``tenant`` when given:
    what a typed short id may stand for."""
    params: dict[str, Any] = {"prefix": prefix, "n": limit}
    where = _trace_list_filters(tenant, None, params)
    rows = store.query(
        f"SELECT DISTINCT TraceId FROM {TRACE_LIST} WHERE startsWith(TraceId, {{prefix:String}}) "
        f"AND {where} ORDER BY TraceId LIMIT {{n:UInt32}}", params)
    return [r["TraceId"] for r in rows]


def _trace_list_filters(tenant: str | None, service: str | None,
                        params: dict[str, Any]) -> str:
    where = ["1"]
    if tenant is not None:
        where.append("Tenant = {tenant:String}")
        params["tenant"] = tenant
    if service:
        where.append("ServiceName = {service:String}")
        params["service"] = service
    return " AND ".join(where)


def list_traces(
    store: Store,
    service: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    errors_only: bool = False,
    limit: int = 50,
    tenant: str | None = None,
) -> list[dict[str, Any]]:
    """One row per trace, newest first: root span, its service, start, duration, spans, LLM
    calls and error spans. ``since``/``until`` bound the trace's start; with ``service``, only
    that service's spans count.

    Read from ``rewind_traces`` (see ``migrations``): the newest traces are picked from its
    narrow columns, then only their rows are summed up, LLM calls included (by trace id, its
    sort key)."""
    params: dict[str, Any] = {"limit": int(limit)}
    where = _trace_list_filters(tenant, service, params)
    having = ["1"]
    if errors_only:
        having.append("sum(Errors) > 0")
    if since:
        having.append("min(Start) >= {since:DateTime64(9)}")
        params["since"] = since
    if until:
        having.append("min(Start) <= {until:DateTime64(9)}")
        params["until"] = until
    rows = store.query(
        f"""
SELECT TraceId, Root.1 AS RootSpan, Root.2 AS Service, Start,
       End - toUnixTimestamp64Nano(Start) AS DurationNs, Spans, LlmCalls, Errors
FROM (
    SELECT TraceId, argMinMerge(Root) AS Root, min(Start) AS Start, max(End) AS End,
           sum(Spans) AS Spans, {calls_counted('groupArrayMerge(Calls)')} AS LlmCalls,
           sum(Errors) AS Errors
    FROM {TRACE_LIST}
    WHERE {where} AND TraceId IN (
        SELECT TraceId FROM {TRACE_LIST} WHERE {where}
        GROUP BY TraceId HAVING {' AND '.join(having)}
        ORDER BY min(Start) DESC, TraceId LIMIT {{limit:UInt32}})
    GROUP BY TraceId)
ORDER BY Start DESC, TraceId
""",
        params,
    )
    return _with_lineage(store, rows)


_LINEAGE = {"ReplaySource": A.REPLAY_SOURCE_TRACE_ID, "ForkSource": A.FORK_SOURCE_TRACE_ID,
            "ForkStep": A.FORK_STEP}


def _with_lineage(store: Store, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What each listed trace was made from (``ReplaySource``; ``ForkSource`` and
    ``ForkStep``; '' if nothing), read from the listed traces' own spans only, in their time
    range: attribute maps of those few traces, never of the whole store."""
    if not rows:
        return rows
    picks = ", ".join(f"anyIf({span_attribute(name)}, {span_attribute(name)} != '') AS {alias}"
                      for alias, name in _LINEAGE.items())
    found = store.query(  # the keys decide which spans' values are read: those of few spans
        f"SELECT TraceId, {picks} FROM {TRACES} PREWHERE {MADE_FROM_RUN} "
        "AND TraceId IN {ids:Array(String)} "
        "AND Timestamp >= {lo:DateTime64(9)} AND Timestamp <= {hi:DateTime64(9)} "
        "GROUP BY TraceId",
        {"ids": [r["TraceId"] for r in rows], "lo": min(r["Start"] for r in rows),
         "hi": max(r["Start"] + timedelta(microseconds=int(r["DurationNs"]) // 1000 + 1)
                   for r in rows)})
    by_id = {r["TraceId"]: r for r in found}
    for row in rows:
        made = by_id.get(row["TraceId"], {})
        row.update({alias: str(made.get(alias) or "") for alias in _LINEAGE})
    return rows
