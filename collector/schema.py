"""Table definitions: ``otel_traces`` exactly as the OpenTelemetry Collector's ClickHouse
exporter creates it (so Grafana's trace view and teams already running that exporter work
unchanged), its trace-id lookup, and Rewind's own ``rewind_`` tables.

DDL is built by functions taking a :class:`Layout` (one node, or a cluster's replicated local
tables behind Distributed ones), so both variants come from one source; ``ddl`` renders them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rewind.exporter import attributes as A

from .prices import builtin_prices

TRACES = "otel_traces"
TRACE_LOOKUP = "otel_traces_trace_id_ts"
TRACE_LOOKUP_MV = "otel_traces_trace_id_ts_mv"
LLM_CALLS = "rewind_llm_calls"
LLM_CALLS_MV = "rewind_llm_calls_mv"
MIGRATIONS_TABLE = "rewind_schema_migrations"
MODEL_PRICES = "rewind_model_prices"
LLM_COSTS = "rewind_llm_costs"
TOOL_CALLS = "rewind_tool_calls"

# Retried inserts carry the same token; plain MergeTree only honours it with a window.
DEDUP = "non_replicated_deduplication_window = 10000"
REPLICATED_DEDUP = "replicated_deduplication_window = 10000"
# All spans of a trace land on one shard, so a trace is read (and its lookup row built) there.
SHARD_KEY = "cityHash64(TraceId)"
REPLICA = "'{replica}'"


@dataclass(frozen=True)
class Layout:
    """Where tables live. Default: one node, plain engines. With ``cluster``: each table is a
    replicated ``*_local`` table created ON CLUSTER, with a Distributed table of the plain name
    over it; views read the Distributed tables, materialized views the local ones."""

    cluster: str = ""
    database: str = ""

    def name(self, table: str) -> str:
        """The name queries use (the Distributed table in a cluster)."""
        return f"{self.database}.{table}" if self.database else table

    def local(self, table: str) -> str:
        """The table that stores the rows."""
        return self.name(f"{table}_local" if self.cluster else table)

    @property
    def on_cluster(self) -> str:
        return f" ON CLUSTER {self.cluster}" if self.cluster else ""

    @property
    def dedup(self) -> str:
        return REPLICATED_DEDUP if self.cluster else DEDUP

    def engine(self, kind: str, table: str, *args: str, every_shard: bool = False) -> str:
        """``every_shard``: one replica set spanning the cluster (small tables every node reads)."""
        if not self.cluster:
            return f"{kind}({', '.join(args)})"
        shard = "all" if every_shard else "{shard}"
        local = f"{table}_local" if not every_shard else table
        path = f"'/clickhouse/tables/{shard}/{{database}}/{local}'"
        return f"Replicated{kind}({', '.join((path, REPLICA, *args))})"

    def distributed(self, table: str) -> tuple[str, ...]:
        """The Distributed table over ``table``'s local tables; nothing on one node."""
        if not self.cluster:
            return ()
        database = f"'{self.database}'" if self.database else "currentDatabase()"
        return (f"""
CREATE TABLE IF NOT EXISTS {self.name(table)}{self.on_cluster} AS {self.local(table)}
ENGINE = Distributed({self.cluster}, {database}, {table}_local, {SHARD_KEY})
""",)


SINGLE_NODE = Layout()


def sql_string(text: str) -> str:
    """A ClickHouse string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"

# Columns of otel_traces the writer fills, in row order, with their types (the converter
# encodes Native blocks with them; a test holds them equal to the migrated table).
TRACE_COLUMNS_TYPED = (
    ("Timestamp", "DateTime64(9)"),
    ("TraceId", "String"),
    ("SpanId", "String"),
    ("ParentSpanId", "String"),
    ("TraceState", "String"),
    ("SpanName", "LowCardinality(String)"),
    ("SpanKind", "LowCardinality(String)"),
    ("ServiceName", "LowCardinality(String)"),
    ("ResourceAttributes", "Map(LowCardinality(String), String)"),
    ("ScopeName", "String"),
    ("ScopeVersion", "String"),
    ("SpanAttributes", "Map(LowCardinality(String), String)"),
    ("Duration", "UInt64"),
    ("StatusCode", "LowCardinality(String)"),
    ("StatusMessage", "String"),
    ("Events.Timestamp", "Array(DateTime64(9))"),
    ("Events.Name", "Array(LowCardinality(String))"),
    ("Events.Attributes", "Array(Map(LowCardinality(String), String))"),
    ("Links.TraceId", "Array(String)"),
    ("Links.SpanId", "Array(String)"),
    ("Links.TraceState", "Array(String)"),
    ("Links.Attributes", "Array(Map(LowCardinality(String), String))"),
)
TRACE_COLUMNS = tuple(name for name, _ in TRACE_COLUMNS_TYPED)
TRACE_COLUMN_TYPES = tuple(kind for _, kind in TRACE_COLUMNS_TYPED)


def span_attribute(name: str) -> str:
    """A span attribute in SQL: its value, '' when the span lacks it."""
    return f"SpanAttributes[{sql_string(name)}]"


# A span that is one call to a model (one row each in rewind_llm_calls).
IS_LLM_CALL = (f"{span_attribute(A.OPERATION)} IN "
               f"({', '.join(sql_string(op) for op in A.LLM_OPERATIONS)})")


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
    ScopeName LowCardinality(String) DEFAULT ''
) ENGINE = {layout.engine("MergeTree", LLM_CALLS)}
PARTITION BY toDate(Timestamp)
ORDER BY (ServiceName, RequestModel, Timestamp, TraceId)
SETTINGS {layout.dedup}
"""


def llm_calls_view(layout: Layout = SINGLE_NODE, with_scope: bool = False) -> str:
    """``with_scope`` (migration 4): the scope too, which tells instrumentations apart."""
    a = span_attribute
    scope = ",\n    ScopeName" if with_scope else ""
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


# Default list prices, (model, input, output) USD per million tokens, by model family, from
# the maintained table. Operators keep them current with INSERTs into rewind_model_prices; the
# newest row per model wins.
DEFAULT_PRICES = tuple((model, p.input, p.output) for model, p in builtin_prices().items())
# A dated or "-latest" model name is priced as its family when it has no row of its own
# (every trailing version is dropped: a proxy may append its own date to the upstream name).
MODEL_VERSION_SUFFIX = "(-([0-9]{4}-[0-9]{2}-[0-9]{2}|[0-9]{8}|latest))+$"


def model_prices_table(layout: Layout = SINGLE_NODE) -> str:
    """Small and read by every query: on a cluster, one full copy on every node."""
    engine = layout.engine("ReplacingMergeTree", MODEL_PRICES, "UpdatedAt", every_shard=True)
    return f"""
CREATE TABLE IF NOT EXISTS {layout.name(MODEL_PRICES)}{layout.on_cluster} (
    Model String,
    InputUsdPerMTok Float64,
    OutputUsdPerMTok Float64,
    UpdatedAt DateTime DEFAULT now()
) ENGINE = {engine}
ORDER BY Model
"""


def default_prices(layout: Layout = SINGLE_NODE) -> str:
    """Dated in the past: an operator's own row (stamped now()) wins, and running the insert
    again adds identical rows only."""
    rows = ",\n    ".join(
        f"('{model}', {inp:.2f}, {out:.2f}, '2025-01-01 00:00:00')"
        for model, inp, out in DEFAULT_PRICES
    )
    return f"""
INSERT INTO {layout.name(MODEL_PRICES)} (Model, InputUsdPerMTok, OutputUsdPerMTok, UpdatedAt)
VALUES
    {rows}
"""


def llm_costs_view(layout: Layout = SINGLE_NODE, source: str = LLM_CALLS) -> str:
    """One row per LLM call (``source``) with its cost: the price of its model (the response's,
    else the request's), else of its family. A plain view, so new prices re-price past calls."""
    prices = (
        "(SELECT Model, argMax(InputUsdPerMTok, UpdatedAt) AS InputUsdPerMTok, "
        "argMax(OutputUsdPerMTok, UpdatedAt) AS OutputUsdPerMTok "
        f"FROM {layout.name(MODEL_PRICES)} GROUP BY Model)"
    )
    model = "if(c.ResponseModel != '', c.ResponseModel, c.RequestModel)"
    price = "if(exact.Model != '', exact.{0}, family.{0})"
    return f"""
CREATE VIEW IF NOT EXISTS {layout.name(LLM_COSTS)}{layout.on_cluster} AS
SELECT
    c.Timestamp AS Timestamp, c.TraceId AS TraceId, c.SpanId AS SpanId,
    c.ServiceName AS ServiceName, c.Step AS Step, c.Operation AS Operation,
    c.Provider AS Provider, c.RequestModel AS RequestModel, c.ResponseModel AS ResponseModel,
    c.InputTokens AS InputTokens, c.OutputTokens AS OutputTokens, c.Duration AS Duration,
    c.StatusCode AS StatusCode,
    if(exact.Model != '', exact.Model, family.Model) AS PricedAs,
    (c.InputTokens * {price.format("InputUsdPerMTok")}
     + c.OutputTokens * {price.format("OutputUsdPerMTok")}) / 1e6 AS CostUsd
FROM {layout.name(source)} AS c
LEFT JOIN {prices} AS exact ON exact.Model = {model}
LEFT JOIN {prices} AS family
    ON family.Model = replaceRegexpOne({model}, '{MODEL_VERSION_SUFFIX}', '')
"""


def tool_calls_view(layout: Layout = SINGLE_NODE) -> str:
    a = span_attribute
    return f"""
CREATE VIEW IF NOT EXISTS {layout.name(TOOL_CALLS)}{layout.on_cluster} AS
SELECT
    Timestamp, TraceId, SpanId, ParentSpanId, ServiceName,
    {a(A.TOOL_NAME)} AS ToolName,
    {a(A.TOOL_CALL_ID)} AS CallId,
    toInt64OrDefault({a(A.STEP)}, toInt64(-1)) AS Step,
    Duration, StatusCode,
    {a(A.TOOL_REPLAYED)} = 'true' AS Replayed
FROM {layout.name(TRACES)}
WHERE {a(A.OPERATION)} = {sql_string(A.OPERATION_EXECUTE_TOOL)}
"""


def migrations_table(layout: Layout = SINGLE_NODE) -> str:
    engine = layout.engine("ReplacingMergeTree", MIGRATIONS_TABLE, every_shard=True)
    return f"""
CREATE TABLE IF NOT EXISTS {layout.name(MIGRATIONS_TABLE)}{layout.on_cluster} (
    Version UInt32,
    Description String,
    AppliedAt DateTime DEFAULT now()
) ENGINE = {engine} ORDER BY Version
"""


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    build: Callable[[Layout], tuple[str, ...]]

    @property
    def statements(self) -> tuple[str, ...]:
        """The single-node statements (what ``rewind migrate`` applies)."""
        return self.build(SINGLE_NODE)

    def statements_for(self, layout: Layout) -> tuple[str, ...]:
        return self.build(layout)


def _traces_and_llm_calls(layout: Layout) -> tuple[str, ...]:
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


def _dashboard_views(layout: Layout) -> tuple[str, ...]:
    return (
        model_prices_table(layout),
        default_prices(layout),
        llm_costs_view(layout),
        tool_calls_view(layout),
    )


def _compact_batches(layout: Layout) -> tuple[str, ...]:
    # A collector batch (32 MiB by default) lands as one compact part (a handful of files)
    # instead of a wide one (a file per column and subcolumn, 125 here): fewer files to
    # create and delete at every insert and merge. Merged parts past 64 MiB are wide.
    return (f"ALTER TABLE {layout.local(TRACES)}{layout.on_cluster} "
            "MODIFY SETTING min_bytes_for_wide_part = 67108864",)


def _llm_steps(layout: Layout) -> tuple[str, ...]:
    from .llm_steps import statements  # it builds on this module's definitions
    return statements(layout)


FIRST_MIGRATIONS: tuple[Migration, ...] = (  # all of them: migrations.MIGRATIONS
    Migration(1, "otel_traces with trace-id lookup; rewind_llm_calls", _traces_and_llm_calls),
    Migration(2, "rewind_model_prices, rewind_llm_costs, rewind_tool_calls", _dashboard_views),
    Migration(3, "otel_traces: inserted batches as compact parts", _compact_batches),
    Migration(4, "rewind_llm_steps: one row per LLM call however many spans describe it",
              _llm_steps),
)
