"""Usage and the cassette fetch written by hand, for ``store_queries``: ``rewind stats``
summed from ``rewind_llm_calls`` (each trace's calls side by side) or from the
``rewind_llm_steps`` view (as stats read before the rollup), and one trace's spans and version
read from the spans table by trace id and time range.
"""

from __future__ import annotations

from typing import Any

from rewind.collector.store.llm_steps import LLM_STEPS, llm_steps_view, shadowed_by
from rewind.collector.store.read import reader
from rewind.collector.store.read.filters import UsageFilters
from rewind.collector.store.schema import LLM_CALLS, TRACE_LIST, TRACE_LOOKUP, TRACES
from rewind.collector.store.store import Store

# --- stats --------------------------------------------------------------------------------

def usage_key(rows: list[Any]) -> list[tuple]:
    return sorted((u.service, u.model, u.calls, u.input_tokens, u.output_tokens, u.errors,
                   u.duration_ns) for u in rows)


_PEER = ("SpanId", "toInt64(toUnixTimestamp64Nano(Timestamp))",
         "toInt64(toUnixTimestamp64Nano(Timestamp) + Duration)", "Operation", "RequestModel",
         "toUInt8(Step >= 0)", "ScopeName")
_FACTS = ("(ServiceName, if(ResponseModel != '', ResponseModel, RequestModel), InputTokens, "
          "OutputTokens, StatusCode, Duration)")
_SUMS = """SELECT f.1 AS service, f.2 AS model, count() AS calls, sum(f.3) AS input_tokens,
       sum(f.4) AS output_tokens, countIf(f.5 = 'STATUS_CODE_ERROR') AS errors,
       sum(f.6) AS duration_ns"""


def _usage_rows(rows: list[dict[str, Any]]) -> list[tuple]:
    return sorted((r["service"], r["model"], r["calls"], r["input_tokens"], r["output_tokens"],
                   r["errors"], r["duration_ns"]) for r in rows)


def usage_by_trace(store: Store, period: UsageFilters | None = None) -> list[tuple]:
    """By hand on rewind_llm_calls: each trace's calls side by side (no window function),
    every call checked against its trace's calls (in ``period``), then summed per service
    and model."""
    c = tuple(f"c.{i}" for i in range(1, 8))
    where = "1"
    if period and period.since and period.until:
        where = (f"Timestamp >= fromUnixTimestamp64Nano({int(period.since.timestamp() * 1e9)}) "
                 f"AND Timestamp <= fromUnixTimestamp64Nano({int(period.until.timestamp() * 1e9)})")
    return _usage_rows(store.query(f"""
{_SUMS}
FROM (
    SELECT groupArray(({', '.join(_PEER)})) AS peers, groupArray({_FACTS}) AS facts
    FROM {LLM_CALLS} WHERE {where} GROUP BY TraceId)
ARRAY JOIN peers AS c, facts AS f
WHERE NOT arrayExists(p -> {shadowed_by('p', *c)}, peers)
GROUP BY service, model"""))


def usage_from_view(store: Store, window: bool = False) -> list[tuple]:
    """The rewind_llm_steps view summed; with ``window``, the view as migration 4 made it (a
    window over each trace's calls; migration 6 replaced it), as stats read it before."""
    source = f"({llm_steps_view().split(' AS', 1)[1]})" if window else LLM_STEPS
    return _usage_rows(store.query(f"""
SELECT ServiceName AS service, if(ResponseModel != '', ResponseModel, RequestModel) AS model,
       count() AS calls, sum(InputTokens) AS input_tokens, sum(OutputTokens) AS output_tokens,
       countIf(StatusCode = 'STATUS_CODE_ERROR') AS errors, sum(Duration) AS duration_ns
FROM {source} GROUP BY service, model"""))


# --- cassette fetch -----------------------------------------------------------------------

def fetch_ours(store: Store, trace_id: str) -> tuple:
    version = reader.trace_version(store, trace_id)
    return version, reader.get_trace(store, trace_id)


def _range(services: bool) -> str:
    """The trace's time range from the lookup table, and with ``services`` its services."""
    where = f"""
  AND toDateTime(Timestamp) >= (SELECT min(Start) FROM {TRACE_LOOKUP}
                                WHERE TraceId = {{tid:String}})
  AND toDateTime(Timestamp) <= (SELECT max(End) FROM {TRACE_LOOKUP}
                                WHERE TraceId = {{tid:String}})"""
    if services:
        where += f"""
  AND ServiceName IN (SELECT ServiceName FROM {TRACE_LIST} WHERE TraceId = {{tid:String}})"""
    return where


def fetch_by_hand(store: Store, trace_id: str, services: bool) -> tuple:
    """The spans in one statement; the version derived from them, as a caller holding the
    spans would."""
    spans = store.query(reader.SPAN_SELECT + "WHERE TraceId = {tid:String}" + _range(services)
                        + "\nORDER BY Timestamp, SpanId", {"tid": trace_id})
    return ((len(spans), max(s["StartNs"] + s["Duration"] for s in spans)), spans)


def version_from_spans(store: Store, trace_id: str, services: bool) -> tuple:
    row = store.query(
        "SELECT count() AS n, max(toInt64(toUnixTimestamp64Nano(Timestamp) + Duration)) AS last "
        f"FROM {TRACES} WHERE TraceId = {{tid:String}}" + _range(services), {"tid": trace_id})[0]
    return row["n"], row["last"]


def sample_traces(store: Store, count: int) -> list[str]:
    rows = store.query(f"SELECT TraceId FROM {TRACE_LIST} GROUP BY TraceId "
                       f"ORDER BY cityHash64(TraceId) LIMIT {count}")
    return [r["TraceId"] for r in rows]
