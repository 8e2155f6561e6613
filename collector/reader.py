"""Reads traces back: one trace's spans through the trace-id lookup, and trace listings.

Every read takes ``tenant``: given, only spans stamped with that tenant (resource attribute
``rewind.tenant``, set by the collector from the sender's token) are seen, so another tenant's
trace reads as unknown; None reads every tenant (an operator, or a store without auth)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rewind.exporter import attributes as A

from .llm_steps import LLM_CALLS_IN_TRACE
from .schema import TRACE_LOOKUP, TRACES, span_attribute
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


def trace_bounds(store: Store, trace_id: str) -> tuple[datetime, datetime] | None:
    rows = store.query(
        f"SELECT min(Start) AS s, max(End) AS e, count() AS n FROM {TRACE_LOOKUP} "
        "WHERE TraceId = {tid:String}",
        {"tid": trace_id},
    )
    if not rows or not rows[0]["n"]:
        return None
    return rows[0]["s"], rows[0]["e"]


def get_trace(store: Store, trace_id: str, tenant: str | None = None) -> list[dict[str, Any]]:
    """All spans of a trace, oldest first; empty when the trace is unknown.

    The lookup table narrows the scan to the trace's time range, as Grafana's trace view does.
    """
    trace_id = trace_id.strip().lower()
    bounds = trace_bounds(store, trace_id)
    if bounds is None:
        return []
    params = {"tid": trace_id, "start": bounds[0], "end": bounds[1]}
    return store.query(
        SPAN_SELECT
        + "WHERE TraceId = {tid:String} AND toDateTime(Timestamp) >= {start:DateTime} "
        f"AND toDateTime(Timestamp) <= {{end:DateTime}} AND {tenant_condition(tenant, params)} "
        "ORDER BY Timestamp, SpanId",
        params,
    )


def trace_version(store: Store, trace_id: str,
                  tenant: str | None = None) -> tuple[int, int] | None:
    """(span count, latest span start in ns): changes whenever spans are added to a trace."""
    bounds = trace_bounds(store, trace_id)
    if bounds is None:
        return None
    params = {"tid": trace_id, "start": bounds[0], "end": bounds[1]}
    row = store.query(
        f"SELECT count() AS n, max(toUnixTimestamp64Nano(Timestamp)) AS last FROM {TRACES} "
        "WHERE TraceId = {tid:String} AND toDateTime(Timestamp) >= {start:DateTime} "
        f"AND toDateTime(Timestamp) <= {{end:DateTime}} AND {tenant_condition(tenant, params)}",
        params,
    )[0]
    return (row["n"], row["last"]) if row["n"] else None


def _first_set(name: str) -> str:
    """In a query grouped by trace: the attribute's value on some span that has it, else ''."""
    return f"anyIf({span_attribute(name)}, {span_attribute(name)} != '')"


def list_traces(
    store: Store,
    service: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    errors_only: bool = False,
    limit: int = 50,
    tenant: str | None = None,
) -> list[dict[str, Any]]:
    """One row per trace, newest first: root span, service, start, duration, LLM calls, status,
    and what it was made from (``ReplaySource``; ``ForkSource`` and ``ForkStep``; '' if
    nothing)."""
    params: dict[str, Any] = {"limit": int(limit)}
    where = ["TraceId != ''", tenant_condition(tenant, params)]
    if service:
        where.append("ServiceName = {service:String}")
        params["service"] = service
    if since:
        where.append("Timestamp >= {since:DateTime64(9)}")
        params["since"] = since
    if until:
        where.append("Timestamp <= {until:DateTime64(9)}")
        params["until"] = until
    having = "HAVING Errors > 0" if errors_only else ""
    return store.query(
        f"""
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
    {_first_set(A.REPLAY_SOURCE_TRACE_ID)} AS ReplaySource,
    {_first_set(A.FORK_SOURCE_TRACE_ID)} AS ForkSource,
    {_first_set(A.FORK_STEP)} AS ForkStep
FROM {TRACES}
WHERE {' AND '.join(where)}
GROUP BY TraceId
{having}
ORDER BY Start DESC
LIMIT {{limit:UInt32}}
""",
        params,
    )
