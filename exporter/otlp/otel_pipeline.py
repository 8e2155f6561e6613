"""The standard OpenTelemetry pipeline: tracer provider -> bounded batch queue -> OTLP exporter.

Only built when the application has not configured a tracer provider of its own; when it has,
our spans join its pipeline (and its queue limits), whose SDK OTLP/gRPC exporter then sends our
encoding (:mod:`.app_exporters`). Honours ``OTEL_SERVICE_NAME``,
``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_TRACES_EXPORTER`` (``otlp``, ``console``, ``none``),
``OTEL_EXPORTER_OTLP_*`` (endpoint, protocol, headers, timeout, compression) and
``OTEL_BSP_*``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor, SpanExporter

from rewind.exporter.otlp import otlp_senders
from rewind.exporter.otlp.export_queue import BoundedSpanProcessor

log = logging.getLogger("rewind.exporter")

_processors: list[BoundedSpanProcessor] = []
_built: list[TracerProvider] = []


def otlp_exporter(endpoint: str | None = None) -> SpanExporter:
    """OTLP exporter chosen by the standard ``OTEL_EXPORTER_OTLP_*`` variables, sending
    requests encoded by :mod:`.otlp_encoding` (each span serialised once)."""
    protocol = (
        os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "grpc"
    ).strip()
    if protocol.startswith("http"):
        if endpoint:
            endpoint = endpoint.rstrip("/") + "/v1/traces"
        return otlp_senders.http_exporter(endpoint=endpoint)
    return otlp_senders.grpc_exporter(endpoint=endpoint)


def configured_provider() -> TracerProvider | None:
    current = trace.get_tracer_provider()
    return current if isinstance(current, TracerProvider) else None


def _exporter_names() -> list[str]:
    raw = os.environ.get("OTEL_TRACES_EXPORTER", "otlp")
    return [n.strip().lower() for n in raw.split(",") if n.strip()] or ["otlp"]


def build_provider(service_name: str | None = None, endpoint: str | None = None,
                   span_exporter: SpanExporter | None = None,
                   attributes: Mapping[str, Any] | None = None) -> TracerProvider:
    """A provider exporting through the bounded queue: to ``span_exporter`` when given,
    else as ``OTEL_TRACES_EXPORTER`` says; ``attributes`` join its resource's."""
    named = {"service.name": service_name} if service_name else {}
    resource = Resource.create({**(attributes or {}), **named})
    provider = TracerProvider(resource=resource)
    for name in ["given"] if span_exporter is not None else _exporter_names():
        if name in ("otlp", "given"):
            processor = BoundedSpanProcessor(span_exporter or otlp_exporter(endpoint))
            _processors.append(processor)
            provider.add_span_processor(processor)
        elif name == "console":
            provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
        elif name != "none":
            log.warning("rewind: OTEL_TRACES_EXPORTER=%s is not supported here; ignored", name)
    _built.append(provider)
    return provider


def exports_through_us(provider: object) -> bool:
    """True when every span of ``provider`` goes through a queue built here (which derives
    pending semconv attributes at export, see :mod:`.enrichment`)."""
    if not any(provider is built for built in _built):
        return False
    processors = getattr(getattr(provider, "_active_span_processor", None),
                         "_span_processors", ())
    return bool(processors) and all(
        isinstance(p, BoundedSpanProcessor) or getattr(p, "observes_only", False)
        for p in processors)


def ensure_provider(
    service_name: str | None = None, endpoint: str | None = None
) -> TracerProvider:
    """The application's SDK tracer provider, or a new one exporting over OTLP."""
    existing = configured_provider()
    if existing is not None:
        return existing
    provider = build_provider(service_name, endpoint)
    trace.set_tracer_provider(provider)
    return provider


def mark_closing() -> None:
    """The process is exiting: once the collector has failed, stop waiting on it."""
    for processor in _processors:
        processor.exporter.closing = True


def export_stats() -> dict[str, int] | None:
    """Queue figures of the pipeline built here (None when the application brought its own)."""
    if not _processors:
        return None
    totals: dict[str, int] = {}
    for processor in _processors:
        for key, value in processor.stats().items():
            totals[key] = totals.get(key, 0) + value
    return totals
