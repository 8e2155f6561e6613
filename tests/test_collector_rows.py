"""OTLP spans become rows with the OTel Collector ClickHouse exporter's conventions."""

from __future__ import annotations

import json

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status

from rewind.collector.rows import span_rows
from rewind.collector.schema import TRACE_COLUMNS


def kv(key, **value):
    return KeyValue(key=key, value=AnyValue(**value))


def make_request():
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
        status=Status(code=Status.STATUS_CODE_ERROR, message="boom"),
        events=[Span.Event(time_unix_nano=1_700_000_000_100_000_000, name="e",
                           attributes=[kv("a", string_value="1")])],
        links=[Span.Link(trace_id=bytes.fromhex("11" * 16), span_id=bytes.fromhex("22" * 8))],
    )
    return ExportTraceServiceRequest(resource_spans=[ResourceSpans(
        resource={"attributes": [kv("service.name", string_value="svc")]},
        scope_spans=[ScopeSpans(scope={"name": "rewind.exporter", "version": "1"}, spans=[span])],
    )])


def test_row_follows_clickhouse_exporter_conventions():
    [row] = list(span_rows(make_request()))
    r = dict(zip(TRACE_COLUMNS, row, strict=True))
    assert r["TraceId"] == "0af7651916cd43dd8448eb211c80319c"
    assert r["SpanId"] == "b7ad6b7169203331"
    assert r["ParentSpanId"] == ""
    assert r["SpanKind"] == "SPAN_KIND_CLIENT"
    assert r["StatusCode"] == "STATUS_CODE_ERROR" and r["StatusMessage"] == "boom"
    assert r["Duration"] == 250_000_000
    assert r["ServiceName"] == "svc"
    assert r["ScopeName"] == "rewind.exporter"
    attrs = r["SpanAttributes"]
    assert attrs["i"] == "42" and attrs["d"] == "0.5" and attrs["b"] == "true"
    assert json.loads(attrs["arr"]) == ["stop"]
    assert json.loads(attrs["map"]) == {"k": 1}
    assert r["Events.Name"] == ["e"] and r["Events.Attributes"] == [{"a": "1"}]
    assert r["Links.TraceId"] == ["11" * 16] and r["Links.SpanId"] == ["22" * 8]
