"""Migration 10: usage from hourly rollups, and cached tokens at their own price.

``rewind_llm_calls`` learns the input tokens read from and written to the provider's cache
(``rewind_llm_steps`` and ``rewind_llm_costs`` carry them; ``rewind_model_prices`` their
prices, so the runs list prices them as ``rewind inspect`` does). Calls stored before keep 0
cached tokens: their spans are not read again.

``rewind_usage_hours`` holds, per hour, tenant, service, model and lineage (original run, or
made from a run), the calls counted once (``llm_steps``) and their tokens, errors, duration
and calls without reported usage, so ``rewind stats`` and ``GET /v1/usage`` over 60 days read
about a thousand hours instead of every call. Two spans of one call may arrive in different
inserts, so an hour is not summed as its spans arrive: it is *rolled* once its next hour has
ended, each call compared with the calls of its trace minutes before and after too, and
rolled again when spans that change it arrive later (``rewind_usage_touched``, kept by a
materialized view, says when they did). A roll appends its rows with the time it started
(``RolledAt``) and one marker row per hour (``Lineage`` 2); a read takes each hour's newest
roll. How reads combine rolled hours with the rest: ``reader_usage``; the choice:
docs/ARCHITECTURE.md ("Usage from hourly rollups").
"""

from __future__ import annotations

from collections.abc import Callable

from rewind.collector.store.llm_steps import (
    CACHE_COLUMNS,
    CALL_COLUMNS,
    LLM_STEPS,
    llm_steps_view_by_trace,
    steps_by_trace,
)
from rewind.collector.store.migrations.calls.m002_costs import (
    CACHE_PRICES,
    default_prices,
    llm_costs_view,
)
from rewind.collector.store.migrations.spans.m001_traces import llm_calls_view
from rewind.collector.store.schema import (
    IS_LLM_CALL,
    LLM_CALLS,
    LLM_CALLS_MV,
    LLM_COSTS,
    MADE_FROM_RUN,
    MODEL_PRICES,
    SINGLE_NODE,
    TRACES,
    USAGE_HOURS,
    USAGE_TOUCHED,
    USAGE_TOUCHED_MV,
    Layout,
    Migration,
    span_attribute,
    sql_string,
)
from rewind.exporter.core import attributes as A

MARKER = 2  # Lineage of the row that says an hour was rolled (calls 0)
# Shadows are looked for this many minutes around the counted hour (two spans of one call
# start together); a read takes a rolled hour only when they are inside its period too.
PEER_MINUTES = 10
# A span changes the rolls of its hour and of the hours next to it (PEER_MINUTES is less).
NEXT_HOURS = 1
# Spans made from a run mark their trace's calls this many hours later as replays or forks.
LINEAGE_HOURS = 24
# A span arriving this close before a roll started may not have been seen by it.
SETTLE_SECONDS = 60
SUMS = ("Calls", "InputTokens", "OutputTokens", *CACHE_COLUMNS, "Errors", "DurationNs",
        "Unreported")
HOUR = "toStartOfHour(Timestamp, 'UTC')"


def hours_table(layout: Layout = SINGLE_NODE) -> str:
    """Small (hours x groups): on a cluster one copy on every node, rolled from all shards."""
    engine = layout.engine("ReplacingMergeTree", USAGE_HOURS, "RolledAt", every_shard=True)
    sums = ",\n    ".join(f"{name} UInt64" for name in SUMS)
    return f"""
CREATE TABLE IF NOT EXISTS {layout.name(USAGE_HOURS)}{layout.on_cluster} (
    Hour DateTime('UTC'),
    Lineage UInt8,
    Tenant LowCardinality(String),
    ServiceName LowCardinality(String),
    Model LowCardinality(String),
    {sums},
    RolledAt DateTime64(9)
) ENGINE = {engine}
PARTITION BY toYYYYMM(Hour)
ORDER BY (Hour, Lineage, Tenant, ServiceName, Model)
"""


def touched_table(layout: Layout = SINGLE_NODE) -> str:
    engine = layout.engine("ReplacingMergeTree", USAGE_TOUCHED, "Touched", every_shard=True)
    return f"""
CREATE TABLE IF NOT EXISTS {layout.name(USAGE_TOUCHED)}{layout.on_cluster} (
    Hour DateTime('UTC'),
    Touched DateTime64(9)
) ENGINE = {engine}
ORDER BY Hour
"""


def touched_view(layout: Layout = SINGLE_NODE) -> str:
    """Every hour whose roll an arriving span changes: an LLM span's own hour and the hours
    around (it is their calls' peer), a span made from a run the hours its trace's calls
    may have."""
    offsets = f"range(-{NEXT_HOURS}, if({MADE_FROM_RUN}, {LINEAGE_HOURS + 1}, {NEXT_HOURS + 1}))"
    return f"""
CREATE MATERIALIZED VIEW IF NOT EXISTS {layout.name(USAGE_TOUCHED_MV)}{layout.on_cluster}
TO {layout.name(USAGE_TOUCHED)}
AS SELECT {HOUR} + toIntervalHour(arrayJoin({offsets})) AS Hour, max(now64(9)) AS Touched
FROM {layout.local(TRACES)}
WHERE {IS_LLM_CALL} OR {MADE_FROM_RUN}
GROUP BY Hour
"""


def from_spans(layout: Layout, peers: str, lineage: str) -> tuple[str, str]:
    """The calls without reported usage matching ``peers`` and the traces made from a run
    by a span matching ``lineage``, read from the spans (what this migration had)."""
    traces = layout.name(TRACES)
    return (f"SELECT TraceId, SpanId FROM {traces} WHERE ({peers}) "
            f"AND {span_attribute(A.USAGE_REPORTED)} = 'false'",
            f"SELECT TraceId FROM {traces} WHERE ({lineage}) AND {MADE_FROM_RUN}")


# Given the layout, ``peers`` and ``lineage``: (unreported calls, traces made from a run).
Marks = Callable[[Layout, str, str], tuple[str, str]]


def _calls(layout: Layout, peers: str, lineage: str, marks: Marks = from_spans) -> str:
    """The calls matching ``peers`` with their span's tenant, whether their usage was
    reported, and whether a span matching ``lineage`` made their trace from a run. Spans'
    attribute maps (their bodies) are read only where their skip index says the key is."""
    columns = ", ".join(f"c.{name} AS {name}" for name in (*CALL_COLUMNS, *CACHE_COLUMNS))
    traces, calls = layout.name(TRACES), layout.name(LLM_CALLS)
    unreported, made_from_run = marks(layout, peers, lineage)
    return f"""(SELECT {columns}, s.Tenant AS Tenant,
    (c.TraceId, c.SpanId) IN ({unreported}) AS Unreported,
    toUInt8(c.TraceId IN ({made_from_run})) AS Lineage
FROM {calls} AS c
ANY LEFT JOIN (SELECT TraceId, SpanId, ResourceAttributes[{sql_string(A.TENANT)}] AS Tenant
    FROM {traces} WHERE ({peers})
        AND (TraceId, SpanId) IN (SELECT TraceId, SpanId FROM {calls} WHERE {peers})) AS s
    ON c.TraceId = s.TraceId AND c.SpanId = s.SpanId
WHERE {peers})"""


def roll(layout: Layout, peers: str, lineage: str, counted: str, hours: str,
         marks: Marks = from_spans) -> str:
    """The statement that rolls the hours the query ``hours`` gives (column ``h``): the calls
    matching ``counted`` (those of these hours), each compared with the calls of its trace
    and tenant matching ``peers`` (minutes around them too), summed per hour and group, with a
    marker row per hour; every row stamped with the time the roll started. ``marks`` says
    where unreported calls and replays are read (migration 11 keeps them apart)."""
    facts = (f"({HOUR}, Tenant, ServiceName, if(ResponseModel != '', ResponseModel, "
             f"RequestModel), Lineage, InputTokens, OutputTokens, {', '.join(CACHE_COLUMNS)}, "
             "StatusCode = 'STATUS_CODE_ERROR', Duration, Unreported)")
    calls = steps_by_trace(peers, facts, _calls(layout, peers, lineage, marks), counted,
                           by="TraceId, Tenant")
    keys = ("Hour", "Lineage", "Tenant", "ServiceName", "Model")
    sums = ", ".join(f"sum({name}) AS {name}" for name in SUMS)
    per_call = ", ".join(f"toUInt64(f.{n}) AS {name}" for n, name in
                         enumerate(SUMS[1:], 6))
    zeros = ", ".join(f"toUInt64(0) AS {name}" for name in SUMS)
    return f"""
INSERT INTO {layout.name(USAGE_HOURS)} ({", ".join(keys)}, {", ".join(SUMS)}, RolledAt)
SELECT {", ".join(keys)}, {sums}, now64(9) AS RolledAt
FROM (
    SELECT toDateTime(f.1, 'UTC') AS Hour, toUInt8(f.5) AS Lineage, toString(f.2) AS Tenant,
        toString(f.3) AS ServiceName, toString(f.4) AS Model, toUInt64(1) AS Calls, {per_call}
    FROM ({calls})
    UNION ALL
    SELECT toDateTime(h, 'UTC') AS Hour, toUInt8({MARKER}) AS Lineage, '' AS Tenant,
        '' AS ServiceName, '' AS Model, {zeros}
    FROM ({hours}))
GROUP BY {", ".join(keys)}
SETTINGS max_bytes_before_external_group_by = 1000000000
"""


def _backfill(layout: Layout) -> tuple[str, ...]:
    """Every hour stored whose next hour has ended is rolled; the others are marked touched,
    so the first read after the migration rolls them when they have ended."""
    calls = layout.name(LLM_CALLS)
    ended = f"{HOUR} + INTERVAL {NEXT_HOURS + 1} HOUR <= now()"
    touch = f"""
INSERT INTO {layout.name(USAGE_TOUCHED)} (Hour, Touched)
SELECT {HOUR} + toIntervalHour(arrayJoin(range(-{NEXT_HOURS}, {NEXT_HOURS + 1}))) AS Hour,
    now64(9) AS Touched
FROM {calls} WHERE NOT ({ended})
GROUP BY Hour
"""
    return touch, roll(layout, "1", "1", ended,
                       f"SELECT DISTINCT {HOUR} AS h FROM {calls} WHERE {ended}")


def statements(layout: Layout) -> tuple[str, ...]:
    """A table created since has the new columns already (migrations 1 and 2), last like the
    ALTERs put them."""
    cache = ", ".join(f"ADD COLUMN IF NOT EXISTS {name} UInt64 DEFAULT 0"
                      for name in CACHE_COLUMNS)
    alters = [f"ALTER TABLE {layout.local(LLM_CALLS)}{layout.on_cluster} {cache}"]
    if layout.cluster:
        alters.append(f"ALTER TABLE {layout.name(LLM_CALLS)}{layout.on_cluster} {cache}")
    prices = ", ".join(f"ADD COLUMN IF NOT EXISTS {name} Float64 DEFAULT -1"
                       for name in CACHE_PRICES)
    return (
        *alters,
        f"DROP VIEW IF EXISTS {layout.name(LLM_CALLS_MV)}{layout.on_cluster}",
        llm_calls_view(layout, with_scope=True, with_cache=True),
        llm_steps_view_by_trace(layout, (*CALL_COLUMNS, *CACHE_COLUMNS)),
        f"ALTER TABLE {layout.name(MODEL_PRICES)}{layout.on_cluster} {prices}",
        default_prices(layout, cached=True),
        f"DROP VIEW IF EXISTS {layout.name(LLM_COSTS)}{layout.on_cluster}",
        llm_costs_view(layout, source=LLM_STEPS, cached=True),
        hours_table(layout),
        touched_table(layout),
        touched_view(layout),
        *_backfill(layout),
    )


MIGRATION = Migration(10, "rewind_usage_hours: usage rolled up per hour; cached tokens priced",
                      statements)
