"""OTLP spans become rows with the OTel Collector ClickHouse exporter's conventions."""

from __future__ import annotations

import json

from rewind.collector.conventions.rows import span_rows
from rewind.collector.store.schema import TRACE_COLUMNS
from tests.support.collector_client import make_request


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
