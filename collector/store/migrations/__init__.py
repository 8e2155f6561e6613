"""Every migration ``rewind migrate`` applies, in version order. Each adds tables and views
beside the existing ones (or redefines a view, or builds a projection beside a table's parts,
which ``rewind migrate`` waits for) and never changes a stored row. The modules sit in
sub-packages by what they hold (``spans``, ``calls``, ``logs``, ``suites``); the version is the
module's number and the only thing a store records, so where a module sits never matters to a
store. A new one is a new module with the next version, in the sub-package of its job,
appended to :data:`MIGRATIONS`.
"""

from __future__ import annotations

from rewind.collector.store.migrations.calls import (
    m002_costs,
    m004_llm_steps,
    m006_steps_by_trace,
    m007_generation_aliases,
    m010_usage_rollup,
)
from rewind.collector.store.migrations.logs import m008_logs
from rewind.collector.store.migrations.spans import (
    m001_traces,
    m003_compact_parts,
    m005_trace_list,
    m011_span_marks,
    m012_span_models,
)
from rewind.collector.store.migrations.suites import m009_suites
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
