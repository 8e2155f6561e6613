"""Table definitions: ``otel_traces`` exactly as the OpenTelemetry Collector's ClickHouse
exporter creates it (so Grafana's trace view and teams already running that exporter work
unchanged), its trace-id lookup, and Rewind's own ``rewind_`` tables.

DDL is built by functions taking the engine, so single-node and cluster variants come from one
source.
"""

from __future__ import annotations

from dataclasses import dataclass

TRACES = "otel_traces"
TRACE_LOOKUP = "otel_traces_trace_id_ts"
TRACE_LOOKUP_MV = "otel_traces_trace_id_ts_mv"
LLM_CALLS = "rewind_llm_calls"
LLM_CALLS_MV = "rewind_llm_calls_mv"
MIGRATIONS_TABLE = "rewind_schema_migrations"

# Retried inserts carry the same token; plain MergeTree only honours it with a window.
DEDUP = "non_replicated_deduplication_window = 10000"

# Column order of otel_traces as written by the writer.
TRACE_COLUMNS = (
    "Timestamp",
    "TraceId",
    "SpanId",
    "ParentSpanId",
    "TraceState",
    "SpanName",
    "SpanKind",
    "ServiceName",
    "ResourceAttributes",
    "ScopeName",
    "ScopeVersion",
    "SpanAttributes",
    "Duration",
    "StatusCode",
    "StatusMessage",
    "Events.Timestamp",
    "Events.Name",
    "Events.Attributes",
    "Links.TraceId",
    "Links.SpanId",
    "Links.TraceState",
    "Links.Attributes",
)

# Operations that are one call to a model (one row each in rewind_llm_calls).
LLM_OPERATIONS = ("chat", "text_completion", "generate_content", "embeddings", "responses")


def traces_table(engine: str = "MergeTree()") -> str:
    return f"""
CREATE TABLE IF NOT EXISTS {TRACES} (
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
) ENGINE = {engine}
PARTITION BY toDate(Timestamp)
PRIMARY KEY (ServiceName, SpanName, toDateTime(Timestamp))
ORDER BY (ServiceName, SpanName, toDateTime(Timestamp), Timestamp)
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1, {DEDUP}
"""


def trace_lookup_table(engine: str = "AggregatingMergeTree()") -> str:
    return f"""
CREATE TABLE IF NOT EXISTS {TRACE_LOOKUP} (
    TraceId String CODEC(ZSTD(1)),
    Start SimpleAggregateFunction(min, DateTime) CODEC(ZSTD(1)),
    End SimpleAggregateFunction(max, DateTime) CODEC(ZSTD(1))
) ENGINE = {engine}
PARTITION BY toStartOfWeek(Start)
ORDER BY (TraceId)
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1
"""


def trace_lookup_view(source: str = TRACES) -> str:
    return f"""
CREATE MATERIALIZED VIEW IF NOT EXISTS {TRACE_LOOKUP_MV} TO {TRACE_LOOKUP}
AS SELECT TraceId, min(Timestamp) AS Start, max(Timestamp) AS End
FROM {source}
WHERE TraceId != ''
GROUP BY TraceId
"""


def llm_calls_table(engine: str = "MergeTree()") -> str:
    return f"""
CREATE TABLE IF NOT EXISTS {LLM_CALLS} (
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
    FinishReasons String
) ENGINE = {engine}
PARTITION BY toDate(Timestamp)
ORDER BY (ServiceName, RequestModel, Timestamp, TraceId)
SETTINGS {DEDUP}
"""


def llm_calls_view(source: str = TRACES) -> str:
    operations = ", ".join(f"'{op}'" for op in LLM_OPERATIONS)
    return f"""
CREATE MATERIALIZED VIEW IF NOT EXISTS {LLM_CALLS_MV} TO {LLM_CALLS}
AS SELECT
    Timestamp, TraceId, SpanId, ServiceName,
    toInt64OrDefault(SpanAttributes['rewind.step'], toInt64(-1)) AS Step,
    SpanAttributes['gen_ai.operation.name'] AS Operation,
    if(SpanAttributes['gen_ai.provider.name'] != '', SpanAttributes['gen_ai.provider.name'],
       SpanAttributes['gen_ai.system']) AS Provider,
    SpanAttributes['gen_ai.request.model'] AS RequestModel,
    SpanAttributes['gen_ai.response.model'] AS ResponseModel,
    toUInt64OrZero(SpanAttributes['gen_ai.usage.input_tokens']) AS InputTokens,
    toUInt64OrZero(SpanAttributes['gen_ai.usage.output_tokens']) AS OutputTokens,
    Duration, StatusCode,
    SpanAttributes['rewind.match_key'] AS MatchKey,
    SpanAttributes['gen_ai.response.finish_reasons'] AS FinishReasons
FROM {source}
WHERE SpanAttributes['gen_ai.operation.name'] IN ({operations})
"""


def migrations_table() -> str:
    return f"""
CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} (
    Version UInt32,
    Description String,
    AppliedAt DateTime DEFAULT now()
) ENGINE = ReplacingMergeTree() ORDER BY Version
"""


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    statements: tuple[str, ...]


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "otel_traces with trace-id lookup; rewind_llm_calls",
        (
            traces_table(),
            trace_lookup_table(),
            trace_lookup_view(),
            llm_calls_table(),
            llm_calls_view(),
        ),
    ),
)
