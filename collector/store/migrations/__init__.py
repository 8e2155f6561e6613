"""Every migration ``rewind migrate`` applies, one module each, in order. Each adds tables and
views beside the existing ones (or redefines a view) and never rewrites stored rows; a new one
is a new module here with the next version, appended to :data:`MIGRATIONS`.
"""

from __future__ import annotations

from rewind.collector.store.migrations import (
    m001_traces,
    m002_costs,
    m003_compact_parts,
    m004_llm_steps,
    m005_trace_list,
    m006_steps_by_trace,
    m007_generation_aliases,
    m008_logs,
    m009_suites,
    m010_usage_rollup,
    m011_span_marks,
    m012_span_models,
)
from rewind.collector.store.schema import Migration

MIGRATIONS: tuple[Migration, ...] = (
    m001_traces.MIGRATION,
    m002_costs.MIGRATION,
    m003_compact_parts.MIGRATION,
    m004_llm_steps.MIGRATION,
    m005_trace_list.MIGRATION,
    m006_steps_by_trace.MIGRATION,
    m007_generation_aliases.MIGRATION,
    m008_logs.MIGRATION,
    m009_suites.MIGRATION,
    m010_usage_rollup.MIGRATION,
    m011_span_marks.MIGRATION,
    m012_span_models.MIGRATION,
)
