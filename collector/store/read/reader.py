"""Reads traces back: one trace's spans and trace listings, through ``rewind_traces`` (one row
per trace, see ``migrations``) newest first, so a listing reads about a page of traces however
large the store, and no read goes through every span's attribute map. With ``reader_usage``
(tokens and cost) and ``reader_runs`` (runs for bisect, runs made from a run) this is every
read query of the store; listings come back as typed rows (:class:`TraceRow`).

Every read takes ``tenant``: given, only spans stamped with that tenant (resource attribute
``rewind.tenant``, set by the collector from the sender's token) are seen, so another tenant's
trace reads as unknown; None reads every tenant (an operator, or a store without auth)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, fields
from datetime import datetime, timedelta
from typing import Any, TypeVar

from rewind.collector.conventions import genai_events
from rewind.collector.store.llm_steps import calls_counted
from rewind.collector.store.migrations.spans.m011_span_marks import made_from_run
from rewind.collector.store.migrations.spans.m012_span_models import naming_model
from rewind.collector.store.read.filters import TraceFilters, epoch_ns
from rewind.collector.store.schema import (
    HOLDS_TEXT,
    INBOUND_PICKS,
    IS_INBOUND,
    LOGS,
    MADE_FROM_RUN,
    ROUTE_ALONE,
    SINGLE_NODE,
    TRACE_LIST,
    TRACE_LOOKUP,
    TRACES,
    span_attribute,
)
from rewind.collector.store.store import Store
from rewind.exporter.core import attributes as A

Row = TypeVar("Row", bound="StoreRow")


def column_name(name: str) -> str:
    """A row field's column (and JSON key): ``trace_id`` -> ``TraceId``."""
    return "".join(part.capitalize() for part in name.split("_"))


class StoreRow:
    """A typed row of a read query, named in the query by its columns (``TraceId``); the
    worker's JSON carries the same keys, so both sources give the same rows."""

    def to_dict(self) -> dict[str, Any]:
        return {column_name(f.name): getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_columns(cls: type[Row], row: Mapping[str, Any]) -> Row:
        """From a query's row or the worker's JSON (where times are ISO text)."""
        values = {}
        for item in fields(cls):
            if column_name(item.name) not in row and item.default is not MISSING:
                continue  # a field an older worker does not send
            value = row[column_name(item.name)]
            if item.type == "datetime" and isinstance(value, str):
                value = datetime.fromisoformat(value)
            values[item.name] = value
        return cls(**values)


@dataclass(frozen=True)
class TraceRow(StoreRow):
    """One listed trace: its root span and service, start, duration, spans, LLM calls (each
    once) and error spans; what it was made from ('' when nothing)."""

    trace_id: str
    root_span: str
    service: str
    start: datetime
    duration_ns: int
    spans: int
    llm_calls: int
    errors: int
    replay_source: str = ""
    fork_source: str = ""
    fork_step: str = ""
    inbound: str = ""  # "request" or "job" when the trace is a unit of work of a service
    route: str = ""  # a request's method and route (or path); a job's function
    status: str = ""  # a request's HTTP status; a job's outcome ("ok" or its exception type)
    matching: int = 0  # traces the filters match on all pages, when counted (filters.count)

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


def holds_traces(store: Store) -> bool:
    """Whether ``store`` has Rewind's span table (something was ever recorded there)."""
    return store.command(f"EXISTS TABLE {TRACES}", writes=False) in (1, "1")


def get_trace(store: Store, trace_id: str, tenant: str | None = None) -> list[dict[str, Any]]:
    """All spans of a trace, oldest first; empty when the trace is unknown.

    ``rewind_traces`` narrows the scan to the trace's time range (as Grafana's trace view does
    with the lookup table) and to its services: ``otel_traces`` is sorted by service, span name
    and time, so of the spans stored in that time range (interleaved with other traces), only
    the granules of the trace's own services are read, bodies included. GenAI events received
    as log records are joined to their spans (``genai_events``) when an LLM span lacks content."""
    trace_id = trace_id.strip().lower()
    params: dict[str, Any] = {"tid": trace_id}
    spans = store.query(
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
    if not spans or not genai_events.wants_events(spans):
        return spans
    return genai_events.joined(spans, store.query(f"""
WITH (SELECT (min(Start), max(End)) FROM {TRACE_LIST} WHERE TraceId = {{tid:String}}) AS bounds
SELECT SpanId, EventName, LogAttributes, Body, toUnixTimestamp64Nano(Timestamp) AS TimeNs
FROM {LOGS}
WHERE TraceId = {{tid:String}} AND startsWith(EventName, 'gen_ai.')
  AND TimestampTime >= toDateTime(bounds.1) - 60
  AND TimestampTime <= toDateTime(fromUnixTimestamp64Nano(bounds.2)) + 60
  AND {tenant_condition(tenant, params)}
ORDER BY Timestamp""", params))


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


def list_traces(store: Store, filters: TraceFilters | None = None,
                tenant: str | None = None) -> list[TraceRow]:
    """One row per trace, newest first. With ``service``, only that service's spans count;
    ``since`` and ``until`` bound a trace's start; every filter applies before ``offset``.

    The page is picked from ``rewind_traces`` newest first, a window of time at a time
    (:func:`_newest`); a model is looked up in ``rewind_span_models`` (migration 12), text
    and routes in the window's spans; runs made from a run are left out by their marks
    (migration 11). Then only the listed traces' rows are summed up, LLM calls included."""
    filters = filters or TraceFilters()
    params: dict[str, Any] = {"limit": int(filters.limit), "offset": _offset(filters),
                              "since": epoch_ns(filters.since, 0),
                              "until": epoch_ns(filters.until, 2**62)}
    where = _trace_list_filters(tenant, filters.service, params)
    spans, having = _in_spans(filters, tenant, params), ["1"]

    def picking(found: bool) -> str:
        return _matching(filters, tenant, params, spans, found)

    if filters.errors:
        having.append("sum(Errors) > 0")
    if filters.since:
        having.append("min(Start) >= fromUnixTimestamp64Nano({since:Int64})")
    if filters.until:
        having.append("min(Start) <= fromUnixTimestamp64Nano({until:Int64})")
    page = _newest(store, where, picking, " AND ".join(having), params, spans)
    rows = store.query(f"""
SELECT TraceId, Root.1 AS RootSpan, Root.2 AS Service, First AS Start,
       Last - toUnixTimestamp64Nano(First) AS DurationNs, Spans, LlmCalls, Errors
FROM (
    SELECT TraceId, argMinMerge(Root) AS Root, min(Start) AS First, max(End) AS Last,
           sum(Spans) AS Spans, {calls_counted('groupArrayMerge(Calls)')} AS LlmCalls,
           sum(Errors) AS Errors
    FROM {TRACE_LIST}
    WHERE {where} AND Start >= fromUnixTimestamp64Nano({{first:Int64}})
      AND TraceId IN {{ids:Array(String)}}
    GROUP BY TraceId)
ORDER BY First DESC, TraceId
""", {**params, "ids": [r["TraceId"] for r in page],
      "first": min((r["First"] for r in page), default=0)}) if page else []
    if filters.count:
        matching = params["offset"] + len(rows)
        if len(rows) >= filters.limit or (not rows and params["offset"]):
            matching = store.query(f"""
SELECT count() AS n FROM (SELECT TraceId FROM {TRACE_LIST} WHERE {where}
    AND {_matching(filters, tenant, params, spans, found=False)}
    GROUP BY TraceId HAVING {' AND '.join(having)})""", {**params, "lo": params["since"]})[0]["n"]
        rows = [{**row, "Matching": matching} for row in rows]
    return [TraceRow.from_columns(row) for row in _with_origins(store, rows)]


def _offset(filters: TraceFilters) -> int:
    """Where the page starts, within what a query's UInt32 holds."""
    return min(max(0, int(filters.offset)), 2**32 - 1)


def _in_spans(filters: TraceFilters, tenant: str | None,
              params: dict[str, Any]) -> dict[str, str]:
    """What the text and route filters ask of a span in the listing's service and tenant."""
    scope = ["TraceId != ''", tenant_condition(tenant, params),
             *(["ServiceName = {service:String}"] if filters.service else [])]
    asked = {}
    if filters.text:
        params["text"] = filters.text
        asked["text"] = HOLDS_TEXT
    if filters.route:
        params["route"] = filters.route
        asked["route"] = (f"{IS_INBOUND} AND ({INBOUND_PICKS['Route']} = {{route:String}} "
                          f"OR {ROUTE_ALONE} = {{route:String}})")
    return {name: " AND ".join([*scope, condition]) for name, condition in asked.items()}


def _matching(filters: TraceFilters, tenant: str | None, params: dict[str, Any],
              spans: dict[str, str], found: bool) -> str:
    """Conditions on a listed trace's id: a span in the window (from ``{lo:Int64}`` on) in
    the listing's service and tenant names the model, and one matches each of ``spans``
    (with ``found``: is among the ids found so far, ``{found_<name>:Array(String)}``); no
    span of it was made from a run. A trace starting in the window has all its spans there,
    so these say the same as asking all of its spans."""
    when = "Timestamp >= fromUnixTimestamp64Nano({lo:Int64})"
    picked = ["1"]
    if filters.model:
        params["model"] = filters.model
        named = naming_model(SINGLE_NODE, " AND ".join(
            [when, *(["ServiceName = {service:String}"] if filters.service else []),
             *(["Tenant = {tenant:String}"] if tenant is not None else [])]))
        picked.append(f"TraceId IN ({named})")
    for name, condition in spans.items():
        picked.append(f"TraceId IN {{found_{name}:Array(String)}}" if found else
                      f"TraceId IN (SELECT TraceId FROM {TRACES} WHERE {when} AND {condition})")
    if filters.originals:
        picked.append(f"TraceId NOT IN ({made_from_run(SINGLE_NODE, when)})")
    return " AND ".join(picked)


# Ids of the traces a text or route search found so far, sent with each window's query; past
# this many the window's spans are searched inside the query instead (a server takes a query's
# parameters in its URL, which has a limit).
FOUND_KEPT = 10_000


def _newest(store: Store, where: str, picking: Callable[[bool], str], having: str,
            params: dict[str, Any], spans: dict[str, str]) -> list[dict[str, Any]]:
    """The page's trace ids and starts (``First``, ns), newest first: ranked by the rows of
    ``rewind_traces`` (``where``) starting in a window that grows back from the newest start
    (or ``until``) until the page is full or the window holds every trace.

    A trace starting in the window has all its rows there; one ranked by a row in the window
    but with an earlier row (it *straddles* the window's edge) started before, so it is
    dropped: among the rest, the newest are exactly the newest of all. The first window holds
    16 times the traces needed at the store's average rate (2 when ``spans`` are searched:
    they cost by the day), each next one is 4 times as long (ten minutes at least). The
    traces with a span matching each of ``spans`` are gathered a window's new part at a
    time, so a rare word reads every span once (a common one, past :data:`FOUND_KEPT`
    traces, is searched for in each window's query again: ``picking(False)``)."""
    want = params["offset"] + params["limit"]
    store_range = store.query(
        f"SELECT toUnixTimestamp64Nano(min(Start)) AS first, "
        f"toUnixTimestamp64Nano(max(Start)) AS last, "
        f"(SELECT count() FROM {TRACE_LOOKUP}) AS traces FROM {TRACE_LIST}")[0]
    if not store_range["traces"] or not want:
        return []
    first, top = max(store_range["first"], params["since"]), min(store_range["last"],
                                                               params["until"])
    span = max(store_range["last"] - store_range["first"], 1)
    n = want + params["limit"]  # room for the traces straddling
    width = max(span * (2 if spans else 16) * n // store_range["traces"], 600 * 10**9)
    found: dict[str, set[str]] = {name: set() for name in spans}
    gathering, hi = True, 2**63 - 1
    while True:
        lo = max(top - width, first)
        for name, condition in spans.items() if gathering else ():
            found[name].update(r["TraceId"] for r in store.query(
                f"SELECT DISTINCT TraceId FROM {TRACES} WHERE {condition} "
                "AND Timestamp >= fromUnixTimestamp64Nano({lo:Int64}) "
                "AND Timestamp < fromUnixTimestamp64Nano({hi:Int64})", {**params, "lo": lo,
                                                                         "hi": hi}))
            gathering = gathering and len(found[name]) <= FOUND_KEPT
        ids = {f"found_{name}": sorted(found[name]) for name in spans} if gathering else {}
        picked = picking(gathering)
        ranked = store.query(f"""
SELECT TraceId, toUnixTimestamp64Nano(min(Start)) AS First FROM {TRACE_LIST}
WHERE {where} AND Start >= fromUnixTimestamp64Nano({{lo:Int64}}) AND {picked}
GROUP BY TraceId HAVING {having}
ORDER BY First DESC, TraceId LIMIT {{n:UInt32}}""", {**params, **ids, "lo": lo, "n": n})
        if ranked and lo > store_range["first"]:
            straddling = {r["TraceId"] for r in store.query(f"""
SELECT DISTINCT TraceId FROM {TRACE_LIST}
WHERE {where} AND TraceId IN {{ids:Array(String)}} AND Start < fromUnixTimestamp64Nano({{lo:Int64}})
  AND Start >= (SELECT toDateTime64(min(Start), 9) FROM {TRACE_LOOKUP}
                WHERE TraceId IN {{ids:Array(String)}})""",
                {**params, "lo": lo, "ids": [r["TraceId"] for r in ranked]})}
            ranked = [r for r in ranked if r["TraceId"] not in straddling]
        if len(ranked) >= want or lo <= first:
            return ranked[params["offset"]:want]
        width, hi = width * 4, lo


def _time_range(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The listed traces' ids and the time range their spans lie in."""
    return {"ids": [r["TraceId"] for r in rows], "lo": min(r["Start"] for r in rows),
            "hi": max(r["Start"] + timedelta(microseconds=int(r["DurationNs"]) // 1000 + 1)
                      for r in rows)}


_LINEAGE = {"ReplaySource": A.REPLAY_SOURCE_TRACE_ID, "ForkSource": A.FORK_SOURCE_TRACE_ID,
            "ForkStep": A.FORK_STEP}


def _with_origins(store: Store, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What each listed trace was made from (``ReplaySource``; ``ForkSource`` and
    ``ForkStep``) and the request (route, status) or job (function, outcome) it is, from the
    span nearest the root that carries it (as ``inbound_of``); '' where none. One read of
    the listed traces' spans that carry either, in their time range: the attribute keys'
    skip index decides whose maps are read, those of few spans, never of the whole store."""
    if not rows:
        return rows
    nearest_root = "(toUInt8(ParentSpanId != ''), toUnixTimestamp64Nano(Timestamp))"
    picks = {**{alias: f"anyIf({span_attribute(name)}, {span_attribute(name)} != '')"
                for alias, name in _LINEAGE.items()},
             **{alias: f"argMinIf({expr}, {nearest_root}, {IS_INBOUND})"
                for alias, expr in INBOUND_PICKS.items()}}
    columns = ", ".join(f"{expr} AS {alias}" for alias, expr in picks.items())
    found = store.query(
        f"SELECT TraceId, {columns} FROM {TRACES} PREWHERE ({MADE_FROM_RUN} OR {IS_INBOUND}) "
        "AND TraceId IN {ids:Array(String)} "
        "AND Timestamp >= {lo:DateTime64(9)} AND Timestamp <= {hi:DateTime64(9)} "
        "GROUP BY TraceId", _time_range(rows))
    by_id = {r["TraceId"]: r for r in found}
    for row in rows:
        made = by_id.get(row["TraceId"], {})
        row.update({alias: str(made.get(alias) or "") for alias in picks})
    return rows
