"""Migration 3: a collector batch (32 MiB by default) lands as one compact part (a handful of
files) instead of a wide one (a file per column and subcolumn, 125 here): fewer files to create
and delete at every insert and merge. Merged parts past 64 MiB are wide.
"""

from __future__ import annotations

from rewind.collector.store.schema import TRACES, Layout, Migration


def statements(layout: Layout) -> tuple[str, ...]:
    return (f"ALTER TABLE {layout.local(TRACES)}{layout.on_cluster} "
            "MODIFY SETTING min_bytes_for_wide_part = 67108864",)


MIGRATION = Migration(3, "otel_traces: inserted batches as compact parts", statements)
