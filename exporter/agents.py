"""``invoke_agent`` spans: the parent that groups one agent run's LLM and tool calls."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind

from . import attributes as A


@contextlib.contextmanager
def agent(
    name: str, *, agent_id: str | None = None, conversation_id: str | None = None
) -> Iterator[Span]:
    """Everything inside runs in one trace under an ``invoke_agent {name}`` span."""
    tracer = trace.get_tracer("rewind.exporter")
    attrs = {A.OPERATION: "invoke_agent", A.AGENT_NAME: name}
    if agent_id:
        attrs[A.AGENT_ID] = agent_id
    if conversation_id:
        attrs[A.CONVERSATION_ID] = conversation_id
    with tracer.start_as_current_span(
        f"invoke_agent {name}", kind=SpanKind.INTERNAL, attributes=attrs
    ) as span:
        yield span
