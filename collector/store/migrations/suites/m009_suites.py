"""Migration 9, ``rewind_suites``: named sets of recorded runs (``rewind suite``), one row per
tenant and name, the newest version kept (a removed suite is a row marked ``Removed``), so a
suite is edited by inserting its new definition and never by rewriting rows; and
``rewind_suite_results``: what each run of a suite did each time the suite ran (appended; the
last one per run is what ``suite show`` prints).
"""

from __future__ import annotations

from rewind.collector.store.schema import SUITE_RESULTS, SUITES, Layout, Migration


def statements(layout: Layout) -> tuple[str, ...]:
    engine = layout.engine("ReplacingMergeTree", SUITES, "Version", every_shard=True)
    results = layout.engine("MergeTree", SUITE_RESULTS, every_shard=True)
    return (f"""
CREATE TABLE IF NOT EXISTS {layout.name(SUITES)}{layout.on_cluster} (
    Tenant LowCardinality(String),
    Name String,
    Definition String CODEC(ZSTD(1)),
    Removed UInt8 DEFAULT 0,
    Version DateTime64(6) DEFAULT now64(6)
) ENGINE = {engine} ORDER BY (Tenant, Name)
""", f"""
CREATE TABLE IF NOT EXISTS {layout.name(SUITE_RESULTS)}{layout.on_cluster} (
    Tenant LowCardinality(String),
    Suite String,
    TraceId String,
    Status LowCardinality(String),
    Passed UInt8,
    Cause LowCardinality(String),
    Message String CODEC(ZSTD(1)),
    Scores String CODEC(ZSTD(1)),
    Replayed String,
    RanAt DateTime64(6) DEFAULT now64(6)
) ENGINE = {results} ORDER BY (Tenant, Suite, TraceId, RanAt)
""")


MIGRATION = Migration(9, "rewind_suites, rewind_suite_results: regression suites", statements)
