"""Migration 11: the few spans usage asks about, kept apart.

Usage over a period reads its ended hours from the rollup (migration 10) and its edges from the
calls; for the calls at the edges it asked ``otel_traces`` which traces were made from a run
(a day of spans before them) and which calls did not report their usage. Those questions read
the skip indexes of every span in the hours around, so the edges grew with the spans an hour
holds. ``rewind_span_marks``, kept by a materialized view, holds one row per such span and
mark (a replay's or fork's spans, a streamed call without its counts): a few rows per run, so
the edges' checks and the rolls cost the same however busy the hours are. Spans stored before
are marked by the migration.
"""

from __future__ import annotations

from rewind.collector.store.schema import (
    MADE_FROM_RUN,
    SINGLE_NODE,
    SPAN_MARKS,
    SPAN_MARKS_MV,
    Layout,
    Migration,
    kept_from_spans,
    span_attribute,
)
from rewind.exporter.core import attributes as A

MADE_FROM = 1  # a span of a replay or fork: its trace's calls are not the original run's
UNREPORTED = 2  # an LLM span whose usage the provider did not report

_UNREPORTED = f"{span_attribute(A.USAGE_REPORTED)} = 'false'"
_MARKS = (f"arrayFilter(m -> m != 0, [if({MADE_FROM_RUN}, {MADE_FROM}, 0), "
          f"if({_UNREPORTED}, {UNREPORTED}, 0)])")


def marks_table(layout: Layout = SINGLE_NODE) -> str:
    return f"""
CREATE TABLE IF NOT EXISTS {layout.local(SPAN_MARKS)}{layout.on_cluster} (
    Timestamp DateTime64(9),
    TraceId String,
    SpanId String,
    Mark UInt8
) ENGINE = {layout.engine("MergeTree", SPAN_MARKS)}
PARTITION BY toYYYYMM(Timestamp)
ORDER BY (Mark, Timestamp, TraceId)
SETTINGS {layout.dedup}
"""


def _marked(source: str) -> str:
    return f"""SELECT Timestamp, TraceId, SpanId, arrayJoin({_MARKS}) AS Mark
FROM {source}
WHERE {MADE_FROM_RUN} OR {_UNREPORTED}"""


def made_from_run(layout: Layout, when: str) -> str:
    """The traces with a span made from a run whose ``Timestamp`` matches ``when``."""
    return f"SELECT TraceId FROM {layout.name(SPAN_MARKS)} WHERE Mark = {MADE_FROM} AND ({when})"


def unreported(layout: Layout, when: str) -> str:
    """(TraceId, SpanId) of the calls without reported usage whose ``Timestamp`` matches
    ``when``."""
    return (f"SELECT TraceId, SpanId FROM {layout.name(SPAN_MARKS)} "
            f"WHERE Mark = {UNREPORTED} AND ({when})")


def marks(layout: Layout, peers: str, lineage: str) -> tuple[str, str]:
    """For a roll (``m010_usage_rollup.roll``): the unreported calls matching ``peers`` and
    the traces made from a run by a span matching ``lineage``, from the marks."""
    return unreported(layout, peers), made_from_run(layout, lineage)


def statements(layout: Layout) -> tuple[str, ...]:
    return kept_from_spans(layout, SPAN_MARKS, SPAN_MARKS_MV, marks_table(layout), _marked)


MIGRATION = Migration(11, "rewind_span_marks: replays' spans and unreported usage, apart",
                      statements)
