"""What the migrations share and queries name: table names, the :class:`Layout` DDL is built
for (one node, or a cluster's replicated local tables behind Distributed ones, so both variants
come from one source), the ``otel_traces`` columns the writer fills, SQL fragments over spans,
and the table that records applied migrations. The tables themselves are created by the
migrations in :mod:`.migrations`, one module each.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rewind.exporter.core import attributes as A

TRACES = "otel_traces"
TRACE_LOOKUP = "otel_traces_trace_id_ts"
TRACE_LOOKUP_MV = "otel_traces_trace_id_ts_mv"
TRACE_LIST = "rewind_traces"
TRACE_LIST_MV = "rewind_traces_mv"
LLM_CALLS = "rewind_llm_calls"
LLM_CALLS_MV = "rewind_llm_calls_mv"
MIGRATIONS_TABLE = "rewind_schema_migrations"
MODEL_PRICES = "rewind_model_prices"
LLM_COSTS = "rewind_llm_costs"
TOOL_CALLS = "rewind_tool_calls"
USAGE_HOURS = "rewind_usage_hours"  # LLM calls and tokens per hour (``rewind stats``)
USAGE_TOUCHED = "rewind_usage_touched"  # when spans last arrived that change an hour's usage
USAGE_TOUCHED_MV = "rewind_usage_touched_mv"
SPAN_MARKS = "rewind_span_marks"  # spans made from a run, calls without reported usage
SPAN_MARKS_MV = "rewind_span_marks_mv"
SPAN_MODELS = "rewind_span_models"  # the spans naming each model, by time (listings by model)
SPAN_MODELS_MV = "rewind_span_models_mv"
SUITES = "rewind_suites"  # named sets of recorded runs (``rewind suite``)
SUITE_RESULTS = "rewind_suite_results"  # what each run of a suite did, each time it ran

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

LOGS = "otel_logs"
# Columns of otel_logs the writer fills, in row order (TimestampTime is its DEFAULT).
LOG_COLUMNS_TYPED = (
    ("Timestamp", "DateTime64(9)"),
    ("TraceId", "String"),
    ("SpanId", "String"),
    ("TraceFlags", "UInt8"),
    ("SeverityText", "LowCardinality(String)"),
    ("SeverityNumber", "UInt8"),
    ("ServiceName", "LowCardinality(String)"),
    ("Body", "String"),
    ("ResourceSchemaUrl", "LowCardinality(String)"),
    ("ResourceAttributes", "Map(LowCardinality(String), String)"),
    ("ScopeSchemaUrl", "LowCardinality(String)"),
    ("ScopeName", "String"),
    ("ScopeVersion", "LowCardinality(String)"),
    ("ScopeAttributes", "Map(LowCardinality(String), String)"),
    ("LogAttributes", "Map(LowCardinality(String), String)"),
    ("EventName", "String"),
)
LOG_COLUMNS = tuple(name for name, _ in LOG_COLUMNS_TYPED)
LOG_COLUMN_TYPES = tuple(kind for _, kind in LOG_COLUMNS_TYPED)


def span_attribute(name: str) -> str:
    """A span attribute in SQL: its value, '' when the span lacks it."""
    return f"SpanAttributes[{sql_string(name)}]"


# A span that is one call to a model (one row each in rewind_llm_calls).
IS_LLM_CALL = (f"{span_attribute(A.OPERATION)} IN "
               f"({', '.join(sql_string(op) for op in A.LLM_OPERATIONS)})")

# A span of a run made from another: a replay or a fork.
MADE_FROM_RUN = (f"(mapContains(SpanAttributes, {sql_string(A.REPLAY_SOURCE_TRACE_ID)}) "
                 f"OR mapContains(SpanAttributes, {sql_string(A.FORK_SOURCE_TRACE_ID)}))")

# A span of a request or job a service served (``rewind.inbound.*``), and what a listing
# shows of it: its kind, route (as listed, or alone) and outcome (see reader.TraceRow).
IS_INBOUND = f"mapContains(SpanAttributes, {sql_string(A.INBOUND_KIND)})"
ROUTE_ALONE = (f"if({span_attribute(A.INBOUND_ROUTE)} != '', {span_attribute(A.INBOUND_ROUTE)}, "
               f"{span_attribute(A.INBOUND_PATH)})")
_ERROR_TYPE = f"JSONExtractString({span_attribute(A.INBOUND_ERROR)}, 'type')"
INBOUND_PICKS = {
    "Inbound": span_attribute(A.INBOUND_KIND),
    "Route": f"if({span_attribute(A.INBOUND_KIND)} = {sql_string(A.INBOUND_KIND_JOB)}, "
             f"if({span_attribute(A.INBOUND_APP)} != '', {span_attribute(A.INBOUND_APP)}, "
             f"toString(SpanName)), trim(concat({span_attribute(A.INBOUND_METHOD)}, ' ', "
             f"if({span_attribute(A.INBOUND_ROUTE)} != '', {span_attribute(A.INBOUND_ROUTE)}, "
             f"{span_attribute(A.INBOUND_PATH)}))))",
    "Status": f"if({span_attribute(A.INBOUND_KIND)} = {sql_string(A.INBOUND_KIND_JOB)}, "
              f"if({_ERROR_TYPE} != '', {_ERROR_TYPE}, "
              f"if(mapContains(SpanAttributes, {sql_string(A.INBOUND_ERROR)}), 'error', 'ok')), "
              f"{span_attribute(A.INBOUND_STATUS)})",
}

# A span holding ``{text:String}``: any attribute's value, in any case.
HOLDS_TEXT = ("arrayExists(v -> positionCaseInsensitiveUTF8(v, {text:String}) > 0, "
              "mapValues(SpanAttributes))")

# A dated or "-latest" model name is priced as its family when it has no row of its own
# (every trailing version is dropped: a proxy may append its own date to the upstream name).
MODEL_VERSION_SUFFIX = "(-([0-9]{4}-[0-9]{2}-[0-9]{2}|[0-9]{8}|latest))+$"


def kept_from_spans(layout: Layout, table: str, view: str, create: str,
                    select: Callable[[str], str]) -> tuple[str, ...]:
    """A table of ours kept from the spans by a materialized view: ``create`` (and the
    Distributed table over it), the view (each shard's spans), then the spans stored before,
    those inserted meanwhile once more: ``select`` reads a span table, and its rows are read
    with ``IN``, so a row entered twice changes no answer."""
    return (
        create,
        *layout.distributed(table),
        f"""
CREATE MATERIALIZED VIEW IF NOT EXISTS {layout.name(view)}{layout.on_cluster}
TO {layout.local(table)}
AS {select(layout.local(TRACES))}
""",
        f"INSERT INTO {layout.name(table)} {select(layout.name(TRACES))}",
    )


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
    """One schema change: ``build`` gives its statements for a layout."""

    version: int
    description: str
    build: Callable[[Layout], tuple[str, ...]]

    @property
    def statements(self) -> tuple[str, ...]:
        """The single-node statements (what ``rewind migrate`` applies)."""
        return self.build(SINGLE_NODE)

    def statements_for(self, layout: Layout) -> tuple[str, ...]:
        return self.build(layout)
