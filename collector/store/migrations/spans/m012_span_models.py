"""Migration 12: listings and usage read what they need where it lies together, so they cost
about the same however large the store grows.

The trace listing filtered by a model (``rewind traces --model``, the runs page) asked every
span of the store for its request and response model, reading every span's attribute map
(request and response bodies included): seconds at a million spans, more as the store grew.
``rewind_span_models``, kept by a materialized view, holds one narrow row per span and model it
names (any span: an agent's span may name the model too), with its trace, service and tenant,
sorted by model and time; so a listing reads the model's newest rows only, window by window
(``reader.list_traces``). Spans stored before are entered by the migration.

``rewind_traces`` is sorted by trace id, so the newest traces' rows (their LLM calls the
heaviest column) lay one or two in each granule, and a page of them read more granules the
more traces a week held. Its projection ``by_start``, the same rows sorted by start, puts a
page's rows in a granule or two; the engine reads whichever of the two reads less. Merges
rebuild the projection (the rows of a trace are merged into one).

Usage over a period (migration 10) looked for each hour's newest roll among every row of
``rewind_usage_hours`` (twice), and read the calls at the period's edges from a day of
``rewind_llm_calls`` sorted by service and model: both grew with how busy the hours are. The
projection ``rolls`` keeps each hour's newest roll per lineage, and ``by_time`` the calls
sorted by time, so the edges read their minutes only.
"""

from __future__ import annotations

from rewind.collector.store.schema import (
    LLM_CALLS,
    SINGLE_NODE,
    SPAN_MODELS,
    SPAN_MODELS_MV,
    TRACE_LIST,
    USAGE_HOURS,
    Layout,
    Migration,
    kept_from_spans,
    span_attribute,
    sql_string,
)
from rewind.exporter.core import attributes as A

_NAMED = (span_attribute(A.RESPONSE_MODEL), span_attribute(A.REQUEST_MODEL))
BY_START = "by_start"  # rewind_traces' projection sorted by start


def models_table(layout: Layout = SINGLE_NODE) -> str:
    return f"""
CREATE TABLE IF NOT EXISTS {layout.local(SPAN_MODELS)}{layout.on_cluster} (
    Timestamp DateTime64(9) CODEC(Delta(8), ZSTD(1)),
    TraceId String CODEC(ZSTD(1)),
    ServiceName LowCardinality(String),
    Tenant LowCardinality(String),
    Model LowCardinality(String)
) ENGINE = {layout.engine("MergeTree", SPAN_MODELS)}
PARTITION BY toYYYYMM(Timestamp)
ORDER BY (Model, Timestamp, TraceId)
SETTINGS {layout.dedup}
"""


def _named(source: str) -> str:
    """A row per span of ``source`` and distinct model it names (response or request)."""
    models = f"arrayDistinct(arrayFilter(m -> m != '', [{', '.join(_NAMED)}]))"
    keys = " OR ".join(f"mapContains(SpanAttributes, {sql_string(name)})"
                       for name in (A.RESPONSE_MODEL, A.REQUEST_MODEL))
    return f"""SELECT Timestamp, TraceId, ServiceName,
    ResourceAttributes[{sql_string(A.TENANT)}] AS Tenant, arrayJoin({models}) AS Model
FROM {source}
WHERE TraceId != '' AND ({keys})"""


def naming_model(layout: Layout, where: str) -> str:
    """The traces with a span naming ``{model:String}`` among the rows matching ``where``
    (on ``Timestamp``, ``ServiceName``, ``Tenant``)."""
    return (f"SELECT TraceId FROM {layout.name(SPAN_MODELS)} "
            f"WHERE Model = {{model:String}} AND ({where})")


def projection(table: str, name: str, select: str, rebuilt: bool = False) -> tuple[str, ...]:
    """``table`` (its ALTER, on a cluster's nodes) gets projection ``name``, built for the
    parts stored before (a mutation, waited for); ``rebuilt`` by merges that merge rows. A
    lightweight ``DELETE`` (an operator removing a trace) rebuilds it too: the engine refuses
    one on a table with projections unless told what to do with them."""
    merged = f"{table} MODIFY SETTING deduplicate_merge_projection_mode = 'rebuild', " \
        "lightweight_mutation_projection_mode = 'rebuild'"
    deleted = f"{table} MODIFY SETTING lightweight_mutation_projection_mode = 'rebuild'"
    return (merged if rebuilt else deleted,
            f"{table} ADD PROJECTION IF NOT EXISTS {name} ({select})",
            f"{table} MATERIALIZE PROJECTION {name} SETTINGS mutations_sync = 2")


def projections(layout: Layout) -> tuple[str, ...]:
    alter = f"ALTER TABLE {{}}{layout.on_cluster}".format
    return (
        *projection(alter(layout.local(TRACE_LIST)), BY_START, "SELECT * ORDER BY Start",
                    rebuilt=True),
        *projection(alter(layout.name(USAGE_HOURS)), "rolls",
                    "SELECT Hour, Lineage, max(RolledAt) GROUP BY Hour, Lineage", rebuilt=True),
        *projection(alter(layout.local(LLM_CALLS)), "by_time", "SELECT * ORDER BY Timestamp"),
    )


def statements(layout: Layout) -> tuple[str, ...]:
    return (*kept_from_spans(layout, SPAN_MODELS, SPAN_MODELS_MV, models_table(layout), _named),
            *projections(layout))


MIGRATION = Migration(12, "rewind_span_models; projections: traces by start, usage rolls, "
                      "calls by time", statements)
