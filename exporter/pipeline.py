"""The standard OpenTelemetry pipeline: tracer provider -> batch processor -> OTLP exporter.

Only built when the application has not configured a tracer provider of its own; when it has,
our spans simply join its pipeline.
"""

from __future__ import annotations

import os

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter


def otlp_exporter(endpoint: str | None = None) -> SpanExporter:
    """OTLP exporter chosen by the standard ``OTEL_EXPORTER_OTLP_*`` variables."""
    protocol = (
        os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "grpc"
    ).strip()
    if protocol.startswith("http"):
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        if endpoint:
            endpoint = endpoint.rstrip("/") + "/v1/traces"
        return OTLPSpanExporter(endpoint=endpoint)
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
        OTLPSpanExporter as GrpcExporter,
    )

    return GrpcExporter(endpoint=endpoint)


def configured_provider() -> TracerProvider | None:
    current = trace.get_tracer_provider()
    return current if isinstance(current, TracerProvider) else None


def ensure_provider(
    service_name: str | None = None, endpoint: str | None = None
) -> TracerProvider:
    """The application's SDK tracer provider, or a new one exporting over OTLP."""
    existing = configured_provider()
    if existing is not None:
        return existing
    resource = Resource.create({"service.name": service_name} if service_name else {})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(otlp_exporter(endpoint)))
    trace.set_tracer_provider(provider)
    return provider
