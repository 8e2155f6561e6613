"""Which trace a new span joins, and the conversation it belongs to.

A span joins the current OpenTelemetry context. When there is none (a thread the application
started without copying its context, for instance) it joins the *process root* if one is set:
``rewind record`` opens one so that a script's run is one trace (a request or a job starts a
trace of its own: ``units.py``). ``agent(conversation_id=...)``
puts the conversation id in the context so every LLM and tool span under it carries it.
"""

from __future__ import annotations

import logging
from typing import Any

from opentelemetry import context, trace
from opentelemetry.context import Context

_CONVERSATION = context.create_key("rewind.conversation_id")
_root: Context | None = None
_provider: Any = None
TRACER_NAME = "rewind.exporter"


def set_tracer_provider(provider: Any) -> None:
    """The provider ``instrument()`` records to (None: the global one)."""
    global _provider
    _provider = provider


def tracer() -> trace.Tracer:
    return trace.get_tracer(TRACER_NAME, tracer_provider=_provider)


def set_process_root(root: Context | None) -> None:
    global _root
    _root = root


def has_process_root() -> bool:
    return _root is not None


def process_root() -> Context | None:
    """The context holding the process root span, when one is open."""
    return _root


def parent_context() -> Context | None:
    """The context a new span should start in (None: the current one)."""
    if _root is None:
        return None
    if trace.get_current_span().get_span_context().is_valid:
        return None
    return _root


def with_conversation(conversation_id: str, base: Context | None = None) -> Context:
    return context.set_value(_CONVERSATION, conversation_id, base)


def conversation_id(ctx: Context | None = None) -> str | None:
    value = context.get_value(_CONVERSATION, ctx)
    if value is None and _root is not None and ctx is None:
        value = context.get_value(_CONVERSATION, _root)
    return value if isinstance(value, str) else None


def end_quietly(span: Any) -> None:
    """Ending a span runs the application's span processors: their failures stay here."""
    try:
        span.end()
    except Exception:
        logging.getLogger("rewind.exporter").exception("rewind: a span processor failed")
