"""A trace brought from elsewhere: OTLP files as ``rewind import`` takes them.

Three shapes: JSON lines as the OpenTelemetry Collector's file exporter writes them (one
export request per line, ids in hex), one OTLP/JSON document (as trace backends serve them:
bare, or inside Tempo's ``{"trace": ...}`` / ``{"batches": [...]}`` or Jaeger's
``{"result": ...}``), and protobuf: the file exporter's ``format: proto`` (each message after
its length, 4 bytes big-endian) or one bare ``ExportTraceServiceRequest`` / ``TracesData``.
Spans become ``otel_traces`` rows through the collector's own decoding and row conversion (no
I/O), so an imported trace is an ordinary trace (``archive.unpack`` takes them).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from rewind.exporter.core.errors import RewindError

if TYPE_CHECKING:  # protobuf and the row conversion load when an OTLP file is read, not a .rw
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"  # a .rw file is one zstd frame
BACKEND_WRAPPERS = ("trace", "result")  # Tempo's /api/v2/traces, Jaeger's /api/v3/traces

class OtlpFileError(RewindError, ValueError):
    """Not an OTLP file we can read; the message says where it failed."""


def is_otlp(data: bytes) -> bool:
    """Anything but a zstd frame is taken for OTLP."""
    return not data.startswith(ZSTD_MAGIC)


def _unwrapped(document: bytes) -> bytes:
    """A trace backend's answer as the OTLP/JSON it wraps (anything else as it is)."""
    try:
        parsed = json.loads(document)
    except ValueError:
        return document
    if isinstance(parsed, dict) and len(parsed) == 1:
        [(key, inner)] = parsed.items()
        if key in BACKEND_WRAPPERS and isinstance(inner, dict):
            return json.dumps(inner).encode()
        if key == "batches" and isinstance(inner, list):  # Tempo's name for resourceSpans
            return json.dumps({"resourceSpans": inner}).encode()
    return document


def _json_requests(data: bytes) -> Iterator[ExportTraceServiceRequest]:
    from rewind.collector.wire.otlp_json import JsonPayloadError, parse_json

    lines = [line for line in data.splitlines() if line.strip()]
    try:
        for number, line in enumerate(lines, 1):
            try:
                yield parse_json(_unwrapped(line))
            except JsonPayloadError as error:
                raise OtlpFileError(f"line {number}: {error}") from None
    except OtlpFileError:
        if len(lines) == 1:
            raise
        try:  # one pretty-printed document rather than JSON lines
            yield parse_json(_unwrapped(data))
        except JsonPayloadError as error:
            raise OtlpFileError(f"neither OTLP JSON lines nor one OTLP/JSON document: {error}"
                                ) from None


def _length_prefixed(data: bytes) -> list[bytes] | None:
    messages, position = [], 0
    while position + 4 <= len(data):
        (size,) = struct.unpack(">I", data[position:position + 4])
        if size == 0 or position + 4 + size > len(data):
            return None
        messages.append(data[position + 4:position + 4 + size])
        position += 4 + size
    return messages if messages and position == len(data) else None


def _proto_requests(data: bytes) -> list[ExportTraceServiceRequest]:
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    for chunks in (_length_prefixed(data), [data]):
        try:
            requests = [ExportTraceServiceRequest.FromString(c) for c in chunks or []]
        except DecodeError:
            continue
        if requests and all(r.resource_spans for r in requests):
            return requests
    raise OtlpFileError("not OTLP protobuf (an export request, or length-prefixed requests "
                        "as the Collector's file exporter writes with format: proto)")


def _check_spans(request: ExportTraceServiceRequest) -> None:
    """Each span by the rules the receivers apply (``collector.wire.intake.span_error``): a file
    brought in is checked no more loosely than a span sent."""
    from rewind.collector.store.server_settings import Limits
    from rewind.collector.wire.intake import span_error
    from rewind.replay.sources.document import ArchiveError

    limits = Limits()
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            for n, span in enumerate(scope_spans.spans):
                error = span_error(span, limits)
                if error:
                    label = span.span_id.hex() if len(span.span_id) == 8 else f"#{n}"
                    raise ArchiveError(f"span {label} ({span.name[:60]!r}): {error}")


def rows_of(data: bytes) -> list[list[Any]]:
    """Every span of an OTLP file as an ``otel_traces`` row (``schema.TRACE_COLUMNS``)."""
    from rewind.collector.conventions.rows import span_rows

    text = data.lstrip()
    requests = list(_json_requests(data)) if text.startswith(b"{") else _proto_requests(data)
    for request in requests:
        _check_spans(request)
    rows = [row for request in requests for row in span_rows(request)]
    if not rows:
        raise OtlpFileError("the file holds no spans")
    return rows
