"""Rewind exporter: GenAI spans with full payloads, captured at the HTTP client transport.

    from rewind.exporter import agent, instrument, tool
    instrument()                     # honours OTEL_SERVICE_NAME, OTEL_EXPORTER_OTLP_*, REWIND_*

    @tool
    def lookup(order_id: str) -> dict: ...

    with agent("support-bot", conversation_id="ticket-42"):
        client.chat.completions.create(...)

    @job                             # one trace per call, its arguments and result recorded
    def handle(ticket: dict) -> str: ...

Or with no code change: ``opentelemetry-instrument python app.py`` (the
``RewindInstrumentor`` entry point), or ``rewind record -- python app.py``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .agents import agent, workflow
    from .instrumentor import RewindInstrumentor
    from .jobs import job
    from .otel_pipeline import export_stats
    from .process_settings import CaptureMode, CaptureSettings
    from .tools import RecordedToolError, ToolAnswer, tool

__all__ = [
    "CaptureMode",
    "CaptureSettings",
    "RecordedToolError",
    "RewindInstrumentor",
    "ToolAnswer",
    "agent",
    "export_stats",
    "instrument",
    "is_instrumented",
    "job",
    "tool",
    "uninstrument",
    "workflow",
]


def instrument(
    service_name: str | None = None,
    endpoint: str | None = None,
    tracer_provider: Any = None,
    *,
    capture: str | CaptureMode | None = None,
    redact: Iterable[str] | None = None,
    max_body_bytes: int | None = None,
    content_at: str | None = None,
) -> Any:
    """Start recording every LLM call made through httpx or httpx2 in this process, every
    ``@tool`` call and the tool calls of agent frameworks (``frameworks/``). Returns the tracer
    provider spans go to.

    ``tracer_provider`` defaults to the application's own; when it has none, one exporting
    over OTLP (to ``endpoint`` or the ``OTEL_EXPORTER_OTLP_*`` settings) is created, with a
    queue bounded in spans and bytes. ``capture`` (``full``, ``content``, ``metadata``),
    ``redact`` (regular expressions) and ``max_body_bytes`` override ``REWIND_CAPTURE``,
    ``REWIND_REDACT`` and ``REWIND_MAX_BODY_BYTES``; ``content_at`` (``process``,
    ``collector``) overrides ``REWIND_CONTENT_AT``; wrong values raise ``ValueError``.
    Calling it again replaces the previous settings.
    """
    import logging

    from . import attributes as A
    from . import enrichment, scope, tools, transport
    from .otel_pipeline import ensure_provider, exports_through_us
    from .process_settings import replay_source, settings
    from .recording import Recorder

    chosen = settings(capture, redact, max_body_bytes, content_at=content_at)
    for limit in ("OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT"):
        if os.environ.get(limit):
            logging.getLogger(__name__).warning(
                "rewind: %s=%s cuts recorded bodies longer than that; they will not replay",
                limit, os.environ[limit])
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true" and not tracer_provider:
        return None
    provider = tracer_provider or ensure_provider(service_name, endpoint)
    extra = {}
    source = replay_source()
    if source:
        extra[A.REPLAY_SOURCE_TRACE_ID] = source
    recorder = Recorder(provider, extra, chosen,
                        defer=exports_through_us(provider) or chosen.derives_in_collector)
    enrichment.configure(chosen, recorder.redactor)
    transport.set_recorder(recorder)
    tools.configure(provider, chosen)
    from .databases import db_calls as databases

    databases.configure(provider, chosen)  # drivers hooked when the application imports them
    from .rpc import rpc_calls

    rpc_calls.configure(provider, chosen)  # gRPC channels hooked when grpc is imported
    from . import frameworks  # light: no framework is imported before the application does

    frameworks.install()  # unless REWIND_FRAMEWORK_TOOLS turns them off
    from . import servers, stopping

    servers.install()  # each inbound request its own trace, unless REWIND_SERVERS turns it off
    stopping.install(provider)
    scope.set_tracer_provider(provider)
    return provider


def uninstrument() -> None:
    """Stop recording; the HTTP libraries are restored when replay is not using them either."""
    from . import scope, tools, transport
    from .databases import db_calls as databases

    transport.set_recorder(None)
    tools.configure(None)
    databases.configure(None)
    from .rpc import rpc_calls

    rpc_calls.configure(None)
    scope.set_tracer_provider(None)


def is_instrumented() -> bool:
    from . import transport

    return transport.hooks.recorder is not None


# Public names and the module each lives in, imported on first use: a process that only
# replays (``rewind.exporter.transport`` and ``tools``) never loads the recording pipeline.
# Submodules (``rewind.exporter.transport``) are attributes too, imported on first use.
_LAZY = {
    "CaptureMode": ".process_settings", "CaptureSettings": ".process_settings",
    "ENV_REPLAY_SOURCE": ".process_settings", "settings": ".process_settings",
    "RecordedToolError": ".tools", "ToolAnswer": ".tools",
    "tool": ".tools", "RewindInstrumentor": ".instrumentor", "agent": ".agents",
    "workflow": ".agents",
    "job": ".jobs", "Recorder": ".recording", "ensure_provider": ".otel_pipeline",
    "export_stats": ".otel_pipeline", "exports_through_us": ".otel_pipeline",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name], __name__), name)
    elif name == "A":
        value = import_module(".attributes", __name__)
    elif not name.startswith("_"):
        try:
            value = import_module(f".{name}", __name__)
        except ModuleNotFoundError as error:
            if error.name != f"{__name__}.{name}":  # the submodule exists; its dependency not
                raise
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value
