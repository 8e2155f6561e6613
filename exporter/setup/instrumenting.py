"""``instrument()`` and ``uninstrument()`` (public as ``rewind.exporter.instrument``): the
recording of LLM, tool, database, gRPC and inbound calls switched on and off in this process.
Light to import: what they need is imported when they are called."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rewind.exporter.core.process_settings import CaptureMode


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

    from rewind.exporter.capture import transport
    from rewind.exporter.capture.recording import Recorder
    from rewind.exporter.core import attributes as A
    from rewind.exporter.core import scope
    from rewind.exporter.core.process_settings import replay_source, settings
    from rewind.exporter.otlp import app_exporters
    from rewind.exporter.otlp.otel_pipeline import ensure_provider, exports_through_us
    from rewind.exporter.providers import enrichment
    from rewind.exporter.work import tools

    chosen = settings(capture, redact, max_body_bytes, content_at=content_at)
    for limit in ("OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT"):
        if os.environ.get(limit):
            logging.getLogger("rewind.exporter").warning(
                "rewind: %s=%s cuts recorded bodies longer than that; they will not replay",
                limit, os.environ[limit])
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true" and not tracer_provider:
        return None
    provider = tracer_provider or ensure_provider(service_name, endpoint)
    app_exporters.release()
    app_exporters.adopt(provider)  # an application's own OTLP/gRPC exporter: our encoding
    extra = {}
    source = replay_source()
    if source:
        extra[A.REPLAY_SOURCE_TRACE_ID] = source
    recorder = Recorder(provider, extra, chosen,
                        defer=(exports_through_us(provider) or app_exporters.exports_all(provider)
                               or chosen.derives_in_collector))
    enrichment.configure(chosen, recorder.redactor)
    transport.set_recorder(recorder)
    tools.configure(provider, chosen)
    from rewind.exporter.databases import db_calls as databases

    databases.configure(provider, chosen)  # drivers hooked when the application imports them
    from rewind.exporter.rpc import rpc_calls

    rpc_calls.configure(provider, chosen)  # gRPC channels hooked when grpc is imported
    # light: no framework is imported before the application does
    from rewind.exporter import frameworks

    frameworks.install()  # unless REWIND_FRAMEWORK_TOOLS turns them off
    from rewind.exporter import servers
    from rewind.exporter.setup import stopping

    servers.install()  # each inbound request its own trace, unless REWIND_SERVERS turns it off
    stopping.install(provider)
    scope.set_tracer_provider(provider)
    return provider


def uninstrument() -> None:
    """Stop recording; the HTTP libraries are restored when replay is not using them either."""
    from rewind.exporter.capture import transport
    from rewind.exporter.core import scope
    from rewind.exporter.databases import db_calls as databases
    from rewind.exporter.otlp import app_exporters
    from rewind.exporter.work import tools

    transport.set_recorder(None)
    app_exporters.release()
    tools.configure(None)
    databases.configure(None)
    from rewind.exporter.rpc import rpc_calls

    rpc_calls.configure(None)
    scope.set_tracer_provider(None)


def is_instrumented() -> bool:
    from rewind.exporter.capture import transport

    return transport.hooks.recorder is not None
