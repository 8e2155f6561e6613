"""What the collector tests send with: real OpenTelemetry SDK spans through the real OTLP
exporters, raw OTLP bytes over a real gRPC channel, a hand-built request holding every
attribute type, and the rows the store should then hold."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span
from opentelemetry.proto.trace.v1.trace_pb2 import Status as SpanStatus
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from rewind.collector.store.read import reader
from rewind.collector.store.store import Store

EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


def record_spans(exporter: SpanExporter, service: str,
                 resource: dict[str, Any] | None = None) -> list[ReadableSpan]:
    """An agent-shaped trace (server root, client child with events, a link, an error) sent
    through ``exporter``; returns the SDK's own view of the spans."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": service,
                                                        **(resource or {})}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("rewind.tests", "3.1")
    with tracer.start_as_current_span("invoke_agent planner", kind=SpanKind.SERVER) as root:
        root.set_attributes({"gen_ai.agent.name": "planner", "retries": 3, "ratio": 0.5,
                             "stream": True, "tags": ["a", "b"], "sizes": [1, 2, 3],
                             "unicode": "héllo ✓"})
        with tracer.start_as_current_span(
                "chat gpt-4o", kind=SpanKind.CLIENT,
                links=[Link(root.get_span_context(), {"link.kind": "follows"})]) as child:
            child.add_event("gen_ai.choice", {"index": 0, "finish": "stop"})
            child.add_event("retry")
            child.set_status(Status(StatusCode.ERROR, "upstream 503"))
    provider.shutdown()
    return list(memory.get_finished_spans())


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return json.dumps(list(value), ensure_ascii=False, separators=(",", ":"))
    return str(value)


def _attrs(attributes: Any) -> dict[str, str]:
    return {k: _value(v) for k, v in (attributes or {}).items()}


def expected_row(span: ReadableSpan, tenant: str | None = None) -> dict[str, Any]:
    """The row the OTel Collector's ClickHouse exporter conventions give for an SDK span."""
    resource = _attrs(span.resource.attributes)
    if tenant is not None:
        resource["rewind.tenant"] = tenant
    return {
        "StartNs": span.start_time, "TraceId": f"{span.context.trace_id:032x}",
        "SpanId": f"{span.context.span_id:016x}",
        "ParentSpanId": f"{span.parent.span_id:016x}" if span.parent else "",
        "TraceState": span.context.trace_state.to_header(), "SpanName": span.name,
        "SpanKind": f"SPAN_KIND_{span.kind.name}",
        "ServiceName": span.resource.attributes["service.name"],
        "ResourceAttributes": resource, "ScopeName": span.instrumentation_scope.name,
        "ScopeVersion": span.instrumentation_scope.version,
        "SpanAttributes": _attrs(span.attributes), "Duration": span.end_time - span.start_time,
        "StatusCode": f"STATUS_CODE_{span.status.status_code.name}",
        "StatusMessage": span.status.description or "",
        "EventTimesNs": [e.timestamp for e in span.events],
        "EventNames": [e.name for e in span.events],
        "EventAttributes": [_attrs(e.attributes) for e in span.events],
        "LinkTraceIds": [f"{link.context.trace_id:032x}" for link in span.links],
        "LinkSpanIds": [f"{link.context.span_id:016x}" for link in span.links],
        "LinkTraceStates": [link.context.trace_state.to_header() for link in span.links],
        "LinkAttributes": [_attrs(link.attributes) for link in span.links],
    }


def stored_rows(store: Store, trace_id: str) -> list[dict[str, Any]]:
    return sorted(reader.get_trace(store, trace_id), key=lambda row: row["SpanId"])


def assert_stored(store: Store, spans: Sequence[ReadableSpan], tenant: str | None = None) -> None:
    trace_id = f"{spans[0].context.trace_id:032x}"
    want = sorted((expected_row(s, tenant) for s in spans), key=lambda row: row["SpanId"])
    assert stored_rows(store, trace_id) == want


def otlp_request(spans: Iterable[Span], service: str = "raw-client") -> bytes:
    return ExportTraceServiceRequest(resource_spans=[ResourceSpans(
        resource={"attributes": [KeyValue(key="service.name",
                                          value=AnyValue(string_value=service))]},
        scope_spans=[ScopeSpans(scope={"name": "raw"}, spans=list(spans))])]).SerializeToString()


def raw_span(n: int, trace: bytes = b"\x0a" * 16, **fields: Any) -> Span:
    fields.setdefault("span_id", n.to_bytes(8, "big"))
    return Span(trace_id=trace, name=f"span {n}", start_time_unix_nano=1_700_000_000 * 10**9 + n,
                end_time_unix_nano=1_700_000_001 * 10**9, **fields)


def grpc_export(endpoint: str, body: bytes, metadata: Sequence[tuple[str, str]] = (),
                compression: grpc.Compression | None = None,
                credentials: grpc.ChannelCredentials | None = None,
                ) -> ExportTraceServiceResponse:
    """One Export call with raw bytes (so malformed ones can be sent too)."""
    channel = (grpc.secure_channel(endpoint, credentials) if credentials
               else grpc.insecure_channel(endpoint))
    with channel:
        call = channel.unary_unary(EXPORT)
        reply = call(body, metadata=tuple(metadata), compression=compression, timeout=30)
    return ExportTraceServiceResponse.FromString(reply)


def kv(key, **value):
    return KeyValue(key=key, value=AnyValue(**value))


def make_request():
    """One OTLP request: a client span with every attribute type, an event, a link, an error."""
    span = Span(
        trace_id=bytes.fromhex("0af7651916cd43dd8448eb211c80319c"),
        span_id=bytes.fromhex("b7ad6b7169203331"),
        parent_span_id=b"",
        name="chat gpt-4o",
        kind=Span.SPAN_KIND_CLIENT,
        start_time_unix_nano=1_700_000_000_000_000_000,
        end_time_unix_nano=1_700_000_000_250_000_000,
        attributes=[
            kv("s", string_value="x"),
            kv("i", int_value=42),
            kv("d", double_value=0.5),
            kv("b", bool_value=True),
            kv("arr", array_value=ArrayValue(values=[AnyValue(string_value="stop")])),
            kv("map", kvlist_value=KeyValueList(values=[kv("k", int_value=1)])),
        ],
        status=SpanStatus(code=SpanStatus.STATUS_CODE_ERROR, message="boom"),
        events=[Span.Event(time_unix_nano=1_700_000_000_100_000_000, name="e",
                           attributes=[kv("a", string_value="1")])],
        links=[Span.Link(trace_id=bytes.fromhex("11" * 16), span_id=bytes.fromhex("22" * 8))],
    )
    return ExportTraceServiceRequest(resource_spans=[ResourceSpans(
        resource={"attributes": [kv("service.name", string_value="svc")]},
        scope_spans=[ScopeSpans(scope={"name": "rewind.exporter", "version": "1"}, spans=[span])],
    )])
