"""OTLP protobuf spans -> ``otel_traces`` rows, with the value conventions of the
OpenTelemetry Collector's ClickHouse exporter (hex ids, ``SPAN_KIND_*``/``STATUS_CODE_*``
strings, attribute values as strings with arrays and maps as JSON). Pure: no I/O. Credentials
in URL attributes are masked here, whichever exporter sent the span (DESIGN 7b).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from rewind.collector.conventions.openinference import read_openinference
from rewind.collector.conventions.own_spans import read_own
from rewind.collector.conventions.pending_content import derive_pending
from rewind.collector.conventions.traceloop import read_traceloop
from rewind.collector.conventions.vercel_ai import read_vercel_ai
from rewind.exporter.core import attributes as A
from rewind.exporter.core.masking import masked_url_attributes

SPAN_KINDS = {
    Span.SPAN_KIND_UNSPECIFIED: "SPAN_KIND_UNSPECIFIED",
    Span.SPAN_KIND_INTERNAL: "SPAN_KIND_INTERNAL",
    Span.SPAN_KIND_SERVER: "SPAN_KIND_SERVER",
    Span.SPAN_KIND_CLIENT: "SPAN_KIND_CLIENT",
    Span.SPAN_KIND_PRODUCER: "SPAN_KIND_PRODUCER",
    Span.SPAN_KIND_CONSUMER: "SPAN_KIND_CONSUMER",
}
STATUS_CODES = {
    Status.STATUS_CODE_UNSET: "STATUS_CODE_UNSET",
    Status.STATUS_CODE_OK: "STATUS_CODE_OK",
    Status.STATUS_CODE_ERROR: "STATUS_CODE_ERROR",
}


def plain_value(value: AnyValue) -> Any:
    """An attribute value as plain Python (for JSON of arrays and maps)."""
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [plain_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: plain_value(kv.value) for kv in value.kvlist_value.values}
    if kind == "bytes_value":
        return base64.b64encode(value.bytes_value).decode("ascii")
    return getattr(value, kind)


def value_string(value: AnyValue) -> str:
    """The string stored in a ``Map(String, String)`` column for one attribute value."""
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return value.string_value
    if kind == "int_value":
        return str(value.int_value)
    if kind == "bool_value":
        return "true" if value.bool_value else "false"
    if kind in ("array_value", "kvlist_value"):
        return json.dumps(plain_value(value), ensure_ascii=False, separators=(",", ":"))
    if kind is None:
        return ""
    return str(plain_value(value))


def attribute_map(attributes: Any) -> dict[str, str]:
    out = {}
    for kv in attributes:  # the hot loop of ingest: non-empty strings take the short path
        value = kv.value
        out[kv.key] = value.string_value or value_string(value)
    return out


def hex_id(raw: bytes) -> str:
    """Lower-case hex, and '' for an absent or all-zero id."""
    return raw.hex() if raw.strip(b"\x00") else ""


def _service_name(resource_attributes: list[KeyValue]) -> str:
    for kv in resource_attributes:
        if kv.key == "service.name":
            return value_string(kv.value)
    return ""


def span_rows(
    request: ExportTraceServiceRequest, tenant: str | None = None
) -> Iterator[list[Any]]:
    """One row per span, columns in ``schema.TRACE_COLUMNS`` order.

    ``tenant`` (from the sender's token) overrides any ``rewind.tenant`` the sender claimed.
    """
    for resource_spans in request.resource_spans:
        resource = resource_spans.resource.attributes
        resource_map = attribute_map(resource)
        if tenant is not None:
            resource_map[A.TENANT] = tenant
        service = _service_name(resource)
        for scope_spans in resource_spans.scope_spans:
            # Read once per scope: each read of a protobuf field builds a new Python object.
            scope = scope_spans.scope
            scope_name, scope_version = scope.name, scope.version
            for span in scope_spans.spans:
                events, status = span.events, span.status
                start, end = span.start_time_unix_nano, _end(span, events)
                name = span.name
                attributes = read_own(scope_name, name, read_vercel_ai(read_traceloop(
                    read_openinference(attribute_map(span.attributes)))))
                if A.ENRICH in attributes:  # sent with REWIND_CONTENT_AT=collector
                    name, attributes = derive_pending(name, attributes)
                if masked := masked_url_attributes(attributes):  # whoever's span it is
                    attributes.update(masked)
                yield [
                    start,
                    hex_id(span.trace_id),
                    hex_id(span.span_id),
                    hex_id(span.parent_span_id),
                    span.trace_state,
                    name,
                    SPAN_KINDS.get(span.kind, "SPAN_KIND_UNSPECIFIED"),
                    service,
                    resource_map,
                    scope_name,
                    scope_version,
                    attributes,
                    max(end - start, 0),
                    STATUS_CODES.get(status.code, "STATUS_CODE_UNSET"),
                    status.message,
                    *(_events(events) if events else _NO_EVENTS),
                    *(_links(links) if (links := span.links) else _NO_LINKS),
                ]


def _end(span: Span, events: Any) -> int:
    """The span's end, or its last event if later: OpenInference's LlamaIndex instrumentation
    ends a streamed call's span when the stream is handed back, before the request is even
    sent, and records the first token as an event after that end. Read as it is, the span
    overlaps nothing of the call it describes, and is counted as a second call."""
    end = span.end_time_unix_nano
    return max(end, *(e.time_unix_nano for e in events)) if events else end


# Most spans have no events or links: their (read-only) empty columns are shared.
_NO_EVENTS: tuple[list[Any], ...] = ([], [], [])
_NO_LINKS: tuple[list[Any], ...] = ([], [], [], [])


def _events(events: Any) -> tuple[list[Any], list[str], list[dict[str, str]]]:
    return ([e.time_unix_nano for e in events], [e.name for e in events],
            [attribute_map(e.attributes) for e in events])


def _links(links: Any) -> tuple[list[str], list[str], list[str], list[dict[str, str]]]:
    return ([hex_id(link.trace_id) for link in links],
            [hex_id(link.span_id) for link in links],
            [link.trace_state for link in links],
            [attribute_map(link.attributes) for link in links])
