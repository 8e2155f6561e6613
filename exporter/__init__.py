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

from importlib import import_module
from typing import TYPE_CHECKING, Any

from rewind.exporter.setup.instrumenting import instrument, is_instrumented, uninstrument

if TYPE_CHECKING:
    from rewind.exporter.core.process_settings import CaptureMode, CaptureSettings
    from rewind.exporter.otlp.otel_pipeline import export_stats
    from rewind.exporter.servers.jobs import job
    from rewind.exporter.setup.instrumentor import RewindInstrumentor
    from rewind.exporter.work.agents import agent, workflow
    from rewind.exporter.work.tools import RecordedToolError, ToolAnswer, tool

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


# Public names and the module each lives in, imported on first use: a process that only
# replays (``rewind.exporter.capture.transport`` and ``tools``) never loads the recording pipeline.
# Submodules (``rewind.exporter.capture.transport``) are attributes too, imported on first use.
_LAZY = {
    "CaptureMode": ".core.process_settings", "CaptureSettings": ".core.process_settings",
    "ENV_REPLAY_SOURCE": ".core.process_settings", "settings": ".core.process_settings",
    "RecordedToolError": ".work.tool_errors", "ToolAnswer": ".work.tools",
    "tool": ".work.tools", "RewindInstrumentor": ".setup.instrumentor", "agent": ".work.agents",
    "workflow": ".work.agents",
    "job": ".servers.jobs", "Recorder": ".capture.recording",
    "ensure_provider": ".otlp.otel_pipeline",
    "export_stats": ".otlp.otel_pipeline", "exports_through_us": ".otlp.otel_pipeline",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name], __name__), name)
    elif name == "A":
        value = import_module(".core.attributes", __name__)
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
