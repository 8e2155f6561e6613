"""Migration 1: ``otel_traces`` exactly as the OpenTelemetry Collector's ClickHouse exporter
creates it (so Grafana's trace view and teams already running that exporter work unchanged),
its trace-id lookup, and ``rewind_llm_calls``, one row per LLM span, kept by a materialized view.
"""

from __future__ import annotations

from rewind.collector.store.schema import (
    IS_LLM_CALL,
    LLM_CALLS,
    LLM_CALLS_MV,
    SINGLE_NODE,
    TRACE_LOOKUP,
    TRACE_LOOKUP_MV,
    TRACES,
    Layout,
    Migration,
    span_attribute,
)
from rewind.exporter.core import attributes as A


def traces_table(layout: Layout = SINGLE_NODE) -> str:
    return f"""
CREATE TABLE IF NOT EXISTS {layout.local(TRACES)}{layout.on_cluster} (
    Timestamp DateTime64(9) CODEC(Delta(8), ZSTD(1)),
    TraceId String CODEC(ZSTD(1)),
    SpanId String CODEC(ZSTD(1)),
    ParentSpanId String CODEC(ZSTD(1)),
    TraceState String CODEC(ZSTD(1)),
    SpanName LowCardinality(String) CODEC(ZSTD(1)),
    SpanKind LowCardinality(String) CODEC(ZSTD(1)),
    ServiceName LowCardinality(String) CODEC(ZSTD(1)),
    ResourceAttributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    ScopeName String CODEC(ZSTD(1)),
    ScopeVersion String CODEC(ZSTD(1)),
    SpanAttributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    Duration UInt64 CODEC(T64, ZSTD(1)),
    StatusCode LowCardinality(String) CODEC(ZSTD(1)),
    StatusMessage String CODEC(ZSTD(1)),
    Events Nested (
        Timestamp DateTime64(9),
        Name LowCardinality(String),
        Attributes Map(LowCardinality(String), String)
    ) CODEC(ZSTD(1)),
    Links Nested (
        TraceId String,
        SpanId String,
        TraceState String,
        Attributes Map(LowCardinality(String), String)
    ) CODEC(ZSTD(1)),
    ResourceAttributeItems Array(String) ALIAS arrayMap(kv -> concat(kv.1, '=', kv.2),
        CAST(ResourceAttributes, 'Array(Tuple(String, String))')),
    SpanAttributeItems Array(String) ALIAS arrayMap(kv -> concat(kv.1, '=', kv.2),
        CAST(SpanAttributes, 'Array(Tuple(String, String))')),
    INDEX idx_trace_id TraceId TYPE bloom_filter(0.001) GRANULARITY 1,
    INDEX idx_res_attr_key mapKeys(ResourceAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_res_attr_value mapValues(ResourceAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_span_attr_key mapKeys(SpanAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_span_attr_value mapValues(SpanAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_duration Duration TYPE minmax GRANULARITY 1,
    INDEX idx_lower_span_name lower(SpanName) TYPE tokenbf_v1(32768, 3, 0) GRANULARITY 8
) ENGINE = {layout.engine("MergeTree", TRACES)}
PARTITION BY toDate(Timestamp)
PRIMARY KEY (ServiceName, SpanName, toDateTime(Timestamp))
ORDER BY (ServiceName, SpanName, toDateTime(Timestamp), Timestamp)
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1, {layout.dedup}
"""


def trace_lookup_table(layout: Layout = SINGLE_NODE) -> str:
    return f"""
CREATE TABLE IF NOT EXISTS {layout.local(TRACE_LOOKUP)}{layout.on_cluster} (
    TraceId String CODEC(ZSTD(1)),
    Start SimpleAggregateFunction(min, DateTime) CODEC(ZSTD(1)),
    End SimpleAggregateFunction(max, DateTime) CODEC(ZSTD(1))
) ENGINE = {layout.engine("AggregatingMergeTree", TRACE_LOOKUP)}
PARTITION BY toStartOfWeek(Start)
ORDER BY (TraceId)
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1
"""


def trace_lookup_view(layout: Layout = SINGLE_NODE) -> str:
    """On a cluster it reads each shard's local spans: a trace's spans share a shard."""
    return f"""
CREATE MATERIALIZED VIEW IF NOT EXISTS {layout.name(TRACE_LOOKUP_MV)}{layout.on_cluster}
TO {layout.local(TRACE_LOOKUP)}
AS SELECT TraceId, min(Timestamp) AS Start, max(Timestamp) AS End
FROM {layout.local(TRACES)}
WHERE TraceId != ''
GROUP BY TraceId
"""


def llm_calls_table(layout: Layout = SINGLE_NODE) -> str:
    return f"""
CREATE TABLE IF NOT EXISTS {layout.local(LLM_CALLS)}{layout.on_cluster} (
    Timestamp DateTime64(9) CODEC(Delta(8), ZSTD(1)),
    TraceId String CODEC(ZSTD(1)),
    SpanId String CODEC(ZSTD(1)),
    ServiceName LowCardinality(String),
    Step Int64,
    Operation LowCardinality(String),
    Provider LowCardinality(String),
    RequestModel LowCardinality(String),
    ResponseModel LowCardinality(String),
    InputTokens UInt64,
    OutputTokens UInt64,
    Duration UInt64,
    StatusCode LowCardinality(String),
    MatchKey String,
    FinishReasons String,
    ScopeName LowCardinality(String) DEFAULT '',
    CacheReadTokens UInt64 DEFAULT 0,
    CacheCreationTokens UInt64 DEFAULT 0
) ENGINE = {layout.engine("MergeTree", LLM_CALLS)}
PARTITION BY toDate(Timestamp)
ORDER BY (ServiceName, RequestModel, Timestamp, TraceId)
SETTINGS {layout.dedup}
"""


def llm_calls_view(layout: Layout = SINGLE_NODE, with_scope: bool = False,
                   with_cache: bool = False) -> str:
    """``with_scope`` (migration 4): the scope too, which tells instrumentations apart;
    ``with_cache`` (migration 10): the input tokens read from and written to the cache."""
    a = span_attribute
    scope = ",\n    ScopeName" if with_scope else ""
    if with_cache:
        scope += (f",\n    toUInt64OrZero({a(A.CACHE_READ_TOKENS)}) AS CacheReadTokens,"
                  f"\n    toUInt64OrZero({a(A.CACHE_CREATION_TOKENS)}) AS CacheCreationTokens")
    return f"""
CREATE MATERIALIZED VIEW IF NOT EXISTS {layout.name(LLM_CALLS_MV)}{layout.on_cluster}
TO {layout.local(LLM_CALLS)}
AS SELECT
    Timestamp, TraceId, SpanId, ServiceName,
    toInt64OrDefault({a(A.STEP)}, toInt64(-1)) AS Step,
    {a(A.OPERATION)} AS Operation,
    if({a(A.PROVIDER)} != '', {a(A.PROVIDER)},
       {a(A.SYSTEM)}) AS Provider,
    {a(A.REQUEST_MODEL)} AS RequestModel,
    {a(A.RESPONSE_MODEL)} AS ResponseModel,
    toUInt64OrZero({a(A.INPUT_TOKENS)}) AS InputTokens,
    toUInt64OrZero({a(A.OUTPUT_TOKENS)}) AS OutputTokens,
    Duration, StatusCode,
    {a(A.MATCH_KEY)} AS MatchKey,
    {a(A.FINISH_REASONS)} AS FinishReasons{scope}
FROM {layout.local(TRACES)}
WHERE {IS_LLM_CALL}
"""


def statements(layout: Layout) -> tuple[str, ...]:
    return (
        traces_table(layout),
        *layout.distributed(TRACES),
        trace_lookup_table(layout),
        *layout.distributed(TRACE_LOOKUP),
        trace_lookup_view(layout),
        llm_calls_table(layout),
        *layout.distributed(LLM_CALLS),
        llm_calls_view(layout),
    )


MIGRATION = Migration(1, "otel_traces with trace-id lookup; rewind_llm_calls", statements)
