"""Migration 4: ``rewind_llm_calls`` learns each row's scope (which tells instrumentations
apart), ``rewind_llm_steps`` keeps one row per LLM call however many spans describe it (the
rule is in :mod:`rewind.collector.store.llm_steps`), and ``rewind_llm_costs`` reads it.
"""

from __future__ import annotations

from rewind.collector.store.llm_steps import LLM_STEPS, llm_steps_view
from rewind.collector.store.migrations.calls.m002_costs import llm_costs_view
from rewind.collector.store.migrations.spans.m001_traces import llm_calls_view
from rewind.collector.store.schema import LLM_CALLS, LLM_CALLS_MV, LLM_COSTS, Layout, Migration


def statements(layout: Layout) -> tuple[str, ...]:
    """A table created since has the column already, last like the ALTER puts it."""
    add = "ADD COLUMN IF NOT EXISTS ScopeName LowCardinality(String) DEFAULT ''"
    alters = [f"ALTER TABLE {layout.local(LLM_CALLS)}{layout.on_cluster} {add}"]
    if layout.cluster:
        alters.append(f"ALTER TABLE {layout.name(LLM_CALLS)}{layout.on_cluster} {add}")
    return (
        *alters,
        f"DROP VIEW IF EXISTS {layout.name(LLM_CALLS_MV)}{layout.on_cluster}",
        llm_calls_view(layout, with_scope=True),
        llm_steps_view(layout),
        f"DROP VIEW IF EXISTS {layout.name(LLM_COSTS)}{layout.on_cluster}",
        llm_costs_view(layout, source=LLM_STEPS),
    )


MIGRATION = Migration(4, "rewind_llm_steps: one row per LLM call however many spans describe it",
                      statements)
