"""Migration 6 redefines the ``rewind_llm_steps`` view with ``llm_steps.steps_by_trace``: the
same rows without a window function, several times faster for the dashboards and costs.
"""

from __future__ import annotations

from rewind.collector.store.llm_steps import llm_steps_view_by_trace
from rewind.collector.store.schema import Layout, Migration


def statements(layout: Layout) -> tuple[str, ...]:
    return (llm_steps_view_by_trace(layout),)


MIGRATION = Migration(6, "rewind_llm_steps without a window function", statements)
