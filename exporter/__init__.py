"""Rewind exporter: GenAI spans with full payloads, captured at the HTTP client transport.

    from rewind.exporter import instrument, agent
    instrument()                     # honours OTEL_SERVICE_NAME, OTEL_EXPORTER_OTLP_*
    with agent("support-bot"):
        client.chat.completions.create(...)
"""

from __future__ import annotations

import os
from typing import Any

from . import transport
from .agents import agent
from .pipeline import ensure_provider
from .recording import Recorder

__all__ = ["agent", "instrument", "is_instrumented", "uninstrument"]


def instrument(
    service_name: str | None = None,
    endpoint: str | None = None,
    tracer_provider: Any = None,
) -> None:
    """Start recording every LLM call made through httpx or httpx2 in this process.

    ``tracer_provider`` defaults to the application's own; when it has none, one exporting
    over OTLP (to ``endpoint`` or the ``OTEL_EXPORTER_OTLP_*`` settings) is created.
    """
    provider = tracer_provider or ensure_provider(service_name, endpoint)
    extra = {}
    source = os.environ.get("REWIND_REPLAY_SOURCE_TRACE_ID")
    if source:
        extra["rewind.replay.source_trace_id"] = source
    transport.install()
    transport.hooks.observer = Recorder(provider, extra)


def uninstrument() -> None:
    """Stop recording; the HTTP libraries are restored when replay is not using them either."""
    transport.hooks.observer = None
    if transport.hooks.responder is None and transport.hooks.async_responder is None:
        transport.uninstall()


def is_instrumented() -> bool:
    return transport.hooks.observer is not None
