"""Migration 8, ``rewind_suites``: named sets of recorded runs (``rewind suite``), one row per
tenant and name, the newest version kept (a removed suite is a row marked ``Removed``), so a
suite is edited by inserting its new definition and never by rewriting rows.
"""

from __future__ import annotations

from ..schema import SUITES, Layout, Migration


def statements(layout: Layout) -> tuple[str, ...]:
    engine = layout.engine("ReplacingMergeTree", SUITES, "Version", every_shard=True)
    return (f"""
CREATE TABLE IF NOT EXISTS {layout.name(SUITES)}{layout.on_cluster} (
    Tenant LowCardinality(String),
    Name String,
    Definition String CODEC(ZSTD(1)),
    Removed UInt8 DEFAULT 0,
    Version DateTime64(6) DEFAULT now64(6)
) ENGINE = {engine} ORDER BY (Tenant, Name)
""",)


MIGRATION = Migration(8, "rewind_suites: named sets of recorded runs", statements)
