"""The OTLP exporters of the pipeline ``instrument()`` builds: the SDK's own (endpoint,
headers, TLS, compression, retries, timeouts as configured), sending the bytes of
:func:`.otlp_encoding.request` instead of a protobuf object tree.

Each reaches one private seam of its SDK class (the gRPC stub; the HTTP client). When that seam
is not the one known here (another SDK version), the exporter falls back to the stock encoder:
slower, never wrong. Each protocol's SDK module is imported only when that protocol is chosen.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from rewind.exporter.otlp import otlp_encoding

EXPORT_METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


def _serialized(request: Any) -> bytes:
    """A request already encoded as it is; one of the stock encoder's, serialised."""
    return request if isinstance(request, bytes) else request.SerializeToString()


class BytesStub:
    """The trace service stub, taking a request already encoded (or, as the generated stub
    does, a request message)."""

    def __init__(self, channel: Any) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceResponse,
        )

        self.Export = channel.unary_unary(  # the generated stub's name
            EXPORT_METHOD, request_serializer=_serialized,
            response_deserializer=ExportTraceServiceResponse.FromString)


@functools.cache
def _grpc_class() -> type[SpanExporter]:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

    class GrpcSpanExporter(OTLPSpanExporter):
        """OTLP/gRPC; the channel carries our bytes as they are."""

        def _initialize_channel_and_stub(self) -> None:
            super()._initialize_channel_and_stub()
            self._client = BytesStub(self._channel)

        def _translate_data(self, data: Sequence[ReadableSpan]) -> Any:
            if isinstance(getattr(self, "_client", None), BytesStub):
                return otlp_encoding.request(data)
            return encode_spans(data)

    return GrpcSpanExporter


@functools.cache
def _http_class() -> type[SpanExporter]:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    try:
        from opentelemetry.exporter.otlp.common.http import _OTLPHTTPClient as client_kind
    except ImportError:
        client_kind = None

    class HttpSpanExporter(OTLPSpanExporter):
        """OTLP/HTTP (protobuf); the client posts our bytes, compressed as configured."""

        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            client = getattr(self, "_client", None)
            if self._shutdown or client_kind is None or not isinstance(client, client_kind):
                return super().export(spans)
            outcome = client.export(otlp_encoding.request(spans))
            return SpanExportResult.SUCCESS if outcome.success else SpanExportResult.FAILURE

    return HttpSpanExporter


def grpc_exporter(**options: Any) -> SpanExporter:
    """The SDK's OTLP/gRPC span exporter (same options), sending our encoding."""
    return _grpc_class()(**options)


def http_exporter(**options: Any) -> SpanExporter:
    """The SDK's OTLP/HTTP span exporter (same options), sending our encoding."""
    return _http_class()(**options)
