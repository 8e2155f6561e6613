"""Migration 7 redefines the ``rewind_llm_steps`` view with the one-call rule as it stands
(``llm_steps``): spans naming one call ``chat`` and ``generate_content``, or its model with and
without a provider prefix (``openai/gpt-4o-mini``), are one call in the dashboards and costs of
a store made before.
"""

from __future__ import annotations

from rewind.collector.store.llm_steps import llm_steps_view_by_trace
from rewind.collector.store.schema import Layout, Migration


def statements(layout: Layout) -> tuple[str, ...]:
    return (llm_steps_view_by_trace(layout),)


MIGRATION = Migration(7, "rewind_llm_steps: operation aliases and provider-prefixed models",
                      statements)
