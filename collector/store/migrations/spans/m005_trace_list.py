"""Migration 5, ``rewind_traces``: one row per trace, service and tenant, kept by a materialized
view on ``otel_traces``, so trace listings (``GET /v1/traces``, ``rewind traces``, the web UI's
runs page) read a few small columns per trace instead of grouping every span and reading every
span's whole ``SpanAttributes`` map (request and response bodies included) to count LLM calls.
It holds the trace's first start, last end, span and error counts, its root span (name and
service) and the LLM spans as the tuples ``llm_steps`` compares, so a listing counts each call
once as before. Spans stored before the migration are summarised by the migration itself (one
pass over ``otel_traces``); a span inserted while that pass runs may be counted twice in its
trace's span and error counts (never in the stored spans).
"""

from __future__ import annotations

from rewind.collector.store.llm_steps import SPAN_CALL_ROW
from rewind.collector.store.schema import (
    IS_LLM_CALL,
    SINGLE_NODE,
    TRACE_LIST,
    TRACE_LIST_MV,
    TRACES,
    Layout,
    Migration,
    sql_string,
)
from rewind.exporter.core import attributes as A

# The order of an LLM span's tuple in Calls (see llm_steps.shadowed_by).
CALL_TUPLE = "Tuple(String, Int64, Int64, String, String, UInt8, String)"
# The root span first (no parent), then the earliest: (name, service) by that key.
ROOT_KEY = "(toUInt8(ParentSpanId != ''), toInt64(toUnixTimestamp64Nano(Timestamp)))"


def trace_list_table(layout: Layout = SINGLE_NODE) -> str:
    """Ordered by trace id, so the calls of the listed traces are read by index; small granules
    because a row carries its trace's LLM calls."""
    return f"""
CREATE TABLE IF NOT EXISTS {layout.local(TRACE_LIST)}{layout.on_cluster} (
    TraceId String CODEC(ZSTD(1)),
    ServiceName LowCardinality(String),
    Tenant LowCardinality(String),
    Start SimpleAggregateFunction(min, DateTime64(9)) CODEC(ZSTD(1)),
    End SimpleAggregateFunction(max, Int64) CODEC(ZSTD(1)),
    Spans SimpleAggregateFunction(sum, UInt64),
    Errors SimpleAggregateFunction(sum, UInt64),
    Root AggregateFunction(argMin, Tuple(String, String), Tuple(UInt8, Int64)),
    Calls AggregateFunction(groupArray, {CALL_TUPLE}) CODEC(ZSTD(1))
) ENGINE = {layout.engine("AggregatingMergeTree", TRACE_LIST)}
PARTITION BY toStartOfWeek(Start)
ORDER BY (TraceId, ServiceName, Tenant)
SETTINGS index_granularity = 256, ttl_only_drop_parts = 1
"""


def trace_list_select(source: str) -> str:
    """The summary rows of the spans in ``source`` (the view's and the backfill's query)."""
    return f"""SELECT
    TraceId, ServiceName, ResourceAttributes[{sql_string(A.TENANT)}] AS Tenant,
    min(Timestamp) AS Start,
    max(toInt64(toUnixTimestamp64Nano(Timestamp) + Duration)) AS End,
    toUInt64(count()) AS Spans,
    toUInt64(countIf(StatusCode = 'STATUS_CODE_ERROR')) AS Errors,
    argMinState((toString(SpanName), toString(ServiceName)), {ROOT_KEY}) AS Root,
    groupArrayStateIf(CAST(({', '.join(SPAN_CALL_ROW)}), '{CALL_TUPLE}'), {IS_LLM_CALL})
        AS Calls
FROM {source}
WHERE TraceId != ''
GROUP BY TraceId, ServiceName, Tenant"""


def statements(layout: Layout) -> tuple[str, ...]:
    """The table, its view (each shard summarises its own spans: a trace's spans share one),
    then the spans already stored (spilling to disk past 1 GB on a large store)."""
    return (
        trace_list_table(layout),
        *layout.distributed(TRACE_LIST),
        f"CREATE MATERIALIZED VIEW IF NOT EXISTS {layout.name(TRACE_LIST_MV)}"
        f"{layout.on_cluster}\nTO {layout.local(TRACE_LIST)}\nAS "
        + trace_list_select(layout.local(TRACES)),
        f"INSERT INTO {layout.name(TRACE_LIST)}\n{trace_list_select(layout.name(TRACES))}\n"
        "SETTINGS max_bytes_before_external_group_by = 1000000000",
    )


MIGRATION = Migration(5, "rewind_traces: one row per trace for listings", statements)
