"""The trace listing written by hand, for ``store_queries``: each candidate gives the same rows
as ``reader.list_traces`` (the benchmark checks) by another way, so the ratio says what ours
costs over the best a person would write against the same store.

Unfiltered and by service: the newest traces grouped from the spans, or from every row of
``rewind_traces`` (in one pass, or in two: the page, then its calls by id). By model: the
traces whose calls in ``rewind_llm_calls`` name it, every one, or day by day newest first. By
text: the spans' attribute maps scanned day by day, newest first, stopping at the first day by
which the page's traces had all started. The listing as it was before migrations 5 and 12 (every
span grouped, its attribute map read) is here to be timed once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rewind.collector.store.llm_steps import LLM_CALLS_IN_TRACE, calls_counted
from rewind.collector.store.migrations.spans.m005_trace_list import ROOT_KEY
from rewind.collector.store.read import reader
from rewind.collector.store.schema import (
    HOLDS_TEXT,
    LLM_CALLS,
    TRACE_LIST,
    TRACE_LOOKUP,
    TRACES,
    span_attribute,
)
from rewind.collector.store.store import Store
from rewind.exporter.core import attributes as A

LIMIT = 50
TEXT = "itinerary"  # a common word: in most runs' prompts or answers
MODEL = "gpt-4o-mini"


def listing_key(rows: list[Any]) -> list[tuple]:
    """Ours are typed rows, the candidates' dicts of columns: compared on their columns."""
    rows = [r.to_dict() if isinstance(r, reader.TraceRow) else r for r in rows]
    return [(r["TraceId"], r["RootSpan"], r["Service"], r["Start"], int(r["DurationNs"]),
             int(r["Spans"]), int(r["LlmCalls"]), int(r["Errors"])) for r in rows]


def service_where(service: str | None) -> str:
    return "ServiceName = {service:String}" if service else "1"


def listing_from_spans(store: Store, service: str | None) -> list[dict[str, Any]]:
    """By hand on otel_traces: the newest traces from narrow columns, then the attribute maps
    of those traces' spans only (their time range, from the lookup table) for the calls."""
    params = {"service": service, "limit": LIMIT}
    rows = store.query(f"""
SELECT TraceId, argMin((toString(SpanName), toString(ServiceName)), {ROOT_KEY}) AS Root,
       min(Timestamp) AS Start,
       max(toInt64(toUnixTimestamp64Nano(Timestamp) + Duration))
           - toUnixTimestamp64Nano(min(Timestamp)) AS DurationNs,
       count() AS Spans, countIf(StatusCode = 'STATUS_CODE_ERROR') AS Errors
FROM {TRACES} WHERE TraceId != '' AND {service_where(service)}
GROUP BY TraceId ORDER BY Start DESC, TraceId LIMIT {{limit:UInt32}}""", params)
    ids = [r["TraceId"] for r in rows]
    calls = {r["TraceId"]: r["n"] for r in store.query(f"""
SELECT TraceId, {LLM_CALLS_IN_TRACE} AS n FROM {TRACES}
WHERE TraceId IN {{ids:Array(String)}} AND {service_where(service)}
  AND toDateTime(Timestamp) >= (SELECT min(Start) FROM {TRACE_LOOKUP}
                                WHERE TraceId IN {{ids:Array(String)}})
  AND toDateTime(Timestamp) <= (SELECT max(End) FROM {TRACE_LOOKUP}
                                WHERE TraceId IN {{ids:Array(String)}})
GROUP BY TraceId""", {**params, "ids": ids})}
    return [{"TraceId": r["TraceId"], "RootSpan": r["Root"][0], "Service": r["Root"][1],
             "Start": r["Start"], "DurationNs": r["DurationNs"], "Spans": r["Spans"],
             "LlmCalls": calls.get(r["TraceId"], 0), "Errors": r["Errors"]} for r in rows]


def listing_from_summary(store: Store, service: str | None) -> list[dict[str, Any]]:
    """By hand on rewind_traces, in one pass: every trace summed up, the newest kept."""
    return store.query(f"""
SELECT TraceId, argMinMerge(Root).1 AS RootSpan, argMinMerge(Root).2 AS Service,
       min(Start) AS First, First AS Start, max(End) - toUnixTimestamp64Nano(First) AS DurationNs,
       sum(Spans) AS Spans, {calls_counted('groupArrayMerge(Calls)')} AS LlmCalls,
       sum(Errors) AS Errors
FROM {TRACE_LIST} WHERE {service_where(service)}
GROUP BY TraceId ORDER BY First DESC, TraceId LIMIT {{limit:UInt32}}""",
                       {"service": service, "limit": LIMIT})


def rows_by_ids(store: Store, ids: list[str], service: str | None = None) -> list[dict]:
    """The listed rows of the traces ``ids``, newest first: by trace id, rewind_traces' sort
    key, so only their rows' calls are read."""
    return store.query(f"""
SELECT TraceId, Root.1 AS RootSpan, Root.2 AS Service, First AS Start,
       Last - toUnixTimestamp64Nano(First) AS DurationNs, Spans, LlmCalls, Errors
FROM (SELECT TraceId, argMinMerge(Root) AS Root, min(Start) AS First, max(End) AS Last,
             sum(Spans) AS Spans, {calls_counted('groupArrayMerge(Calls)')} AS LlmCalls,
             sum(Errors) AS Errors
      FROM {TRACE_LIST} WHERE TraceId IN {{ids:Array(String)}} AND {service_where(service)}
      GROUP BY TraceId)
ORDER BY Start DESC, TraceId""", {"ids": ids, "service": service}) if ids else []


def listing_from_summary_by_ids(store: Store, service: str | None, matching: str = "1",
                                params: dict | None = None, having: str = "1") -> list[dict]:
    """By hand on rewind_traces, in two statements: the newest traces (whose id is
    ``matching``, their sums ``having``) from the narrow columns, then their rows by id."""
    params = {"service": service, "limit": LIMIT, **(params or {})}
    page = store.query(f"""
SELECT TraceId FROM {TRACE_LIST} WHERE {service_where(service)} AND {matching}
GROUP BY TraceId HAVING {having}
ORDER BY min(Start) DESC, TraceId LIMIT {{limit:UInt32}}""", params)
    return rows_by_ids(store, [r["TraceId"] for r in page], service)


def model_from_calls(store: Store) -> list[dict]:
    """By hand: the traces with a call to the model in rewind_llm_calls, every one."""
    return listing_from_summary_by_ids(
        store, None, f"TraceId IN (SELECT TraceId FROM {LLM_CALLS} "
        "WHERE RequestModel = {model:String} OR ResponseModel = {model:String})",
        {"model": MODEL})


def newest_days_first(store: Store, matching: Callable[[str], str],
                      params: dict[str, Any]) -> list[dict]:
    """By hand, a day (a partition of the spans) at a time, newest first: the traces whose
    rows of that day ``matching(day)`` finds, with their starts from rewind_traces; stops at
    the first day by which ``LIMIT`` of those found had started (a trace not found yet
    started before that day)."""
    days = store.query(f"""
SELECT partition AS day, toInt64(toUnixTimestamp(toDateTime(toDate(partition)))) * 1000000000
    AS start FROM system.parts WHERE database = currentDatabase() AND table = '{TRACES}'
    AND active GROUP BY partition ORDER BY partition DESC""")
    found: dict[str, int] = {}
    for day in days:
        ids = [r["TraceId"] for r in store.query(matching(day["day"]), params)]
        found.update((r["TraceId"], r["First"]) for r in store.query(f"""
SELECT TraceId, toUnixTimestamp64Nano(min(Start)) AS First FROM {TRACE_LIST}
WHERE TraceId IN {{ids:Array(String)}} GROUP BY TraceId""", {"ids": [
            i for i in set(ids) if i not in found]}))
        started = sorted((i for i, first in found.items() if first >= day["start"]),
                         key=lambda i: (-found[i], i))
        if len(started) >= LIMIT:
            return rows_by_ids(store, started[:LIMIT])
    return rows_by_ids(store, sorted(found, key=lambda i: (-found[i], i))[:LIMIT])


def model_by_day(store: Store) -> list[dict]:
    """By hand: the model's calls in rewind_llm_calls, a day at a time, newest first."""
    return newest_days_first(store, lambda day: (
        f"SELECT DISTINCT TraceId FROM {LLM_CALLS} WHERE toDate(Timestamp) = '{day}' AND "
        "(RequestModel = {model:String} OR ResponseModel = {model:String})"), {"model": MODEL})


def text_by_day(store: Store) -> list[dict]:
    """By hand: the spans holding the text, a day at a time, newest first."""
    return newest_days_first(store, lambda day: (
        f"SELECT DISTINCT TraceId FROM {TRACES} WHERE toDate(Timestamp) = '{day}' "
        f"AND TraceId != '' AND {HOLDS_TEXT}"), {"text": TEXT})


def listing_before(store: Store, having: str = "1", params: dict | None = None) -> list[dict]:
    """The listing query as it was before migration 5 (and, filtered, before 12): every span
    grouped, its attribute map read."""
    return store.query(f"""
SELECT TraceId,
    argMin(SpanName, if(ParentSpanId = '', 0, 1) * 1e18 + toUnixTimestamp64Nano(Timestamp))
        AS RootSpan,
    any(ServiceName) AS Service, min(Timestamp) AS Start,
    (max(toUnixTimestamp64Nano(Timestamp) + Duration) - min(toUnixTimestamp64Nano(Timestamp)))
        AS DurationNs,
    count() AS Spans, {LLM_CALLS_IN_TRACE} AS LlmCalls,
    countIf(StatusCode = 'STATUS_CODE_ERROR') AS Errors
FROM {TRACES} WHERE TraceId != '' GROUP BY TraceId HAVING {having}
ORDER BY Start DESC LIMIT {LIMIT}""", params)


# The filtered listings as they were before migration 12, by their HAVING.
BEFORE = {
    "model": (f"countIf({span_attribute(A.RESPONSE_MODEL)} = {{model:String}} "
              f"OR {span_attribute(A.REQUEST_MODEL)} = {{model:String}}) > 0", {"model": MODEL}),
    "text": (f"countIf({HOLDS_TEXT}) > 0", {"text": TEXT}),
}
