"""Rewind's pipeline encodes OTLP requests itself (each span serialised once): the bytes are
those of the SDK's own encoder, for spans of every shape, and they cross gRPC and HTTP to a
receiver as the SDK's exporter would send them."""

from __future__ import annotations

import http.server
import threading
from concurrent import futures

import grpc
import openai
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.trace.span import TraceState

from rewind import exporter
from rewind.exporter.otlp import otlp_encoding
from rewind.exporter.otlp.otel_pipeline import otlp_exporter
from tests.support import wiretap
from tests.support.otlp_sender import ODD

RESOURCE = Resource.create({"service.name": "encoding", "deployment": "test"})
SCOPE = InstrumentationScope("rewind.test", "1.2", "https://schema.example/1",
                             {"scope.attr": "x"})


def odd_spans() -> list[ReadableSpan]:
    """Every field and value type of a span, two resources and three scopes."""
    parent = SpanContext(0xABC, 0x1234, is_remote=True, trace_flags=TraceFlags(1),
                         trace_state=TraceState([("vendor", "v1"), ("other", "o")]))
    context = SpanContext(0xABC, 0x5678, False, TraceFlags(1),
                          trace_state=TraceState([("vendor", "v1")]))
    link = Link(SpanContext(0xDEF, 0x9, True, TraceFlags(1)), {"link.n": 3})
    attributes = {**ODD, "negative": -42, "zero": 0, "false": False, "empty": "",
                  "floats": (0.5, -1.0), "ints": (1, -2), "bools": (True, False),
                  "strs": ("a", ""), "unicode": "déjà vu \U0001f642 \x7f", "big": "x" * 70_000}
    full = ReadableSpan("full span", context, parent=parent, resource=RESOURCE,
                        attributes=attributes, instrumentation_scope=SCOPE,
                        events=(Event("first", {"e": 1, "s": "two"}, timestamp=5),
                                Event("", timestamp=0)),
                        links=(link,), kind=SpanKind.CLIENT,
                        status=Status(StatusCode.ERROR, "it broke: déjà"),
                        start_time=1_700_000_000_000_000_001, end_time=1_700_000_000_000_000_999)
    bare = ReadableSpan("", SpanContext(1, 2, False), resource=Resource.get_empty(),
                        kind=SpanKind.INTERNAL, status=Status(StatusCode.UNSET))
    unscoped = ReadableSpan("no scope", SpanContext(3, 4, False), resource=RESOURCE,
                            kind=SpanKind.SERVER, status=Status(StatusCode.OK),
                            start_time=1, end_time=2)
    other = InstrumentationScope("other")
    return [full, bare, unscoped,
            ReadableSpan("second of scope", SpanContext(5, 6, False), resource=RESOURCE,
                         instrumentation_scope=SCOPE, kind=SpanKind.PRODUCER),
            ReadableSpan("other scope", SpanContext(7, 8, False), resource=RESOURCE,
                         instrumentation_scope=other, kind=SpanKind.CONSUMER)]


def recorded_spans(base_url: str) -> list[ReadableSpan]:
    """Spans the exporter records from real SDK calls (a plain and a streamed answer)."""
    tap = wiretap.Spans()
    exporter.instrument(tracer_provider=tap.provider)
    try:
        client = openai.OpenAI(base_url=base_url + "/v1", api_key="sk-enc", max_retries=0)
        client.chat.completions.create(model="gpt-4o", messages=[
            {"role": "user", "content": "say \"hi\"\nand\tmore é"}])
        list(client.chat.completions.create(model="gpt-4o", stream=True, messages=[
            {"role": "user", "content": "stream"}]))
    finally:
        exporter.uninstrument()
    return tap.finished()


def test_bytes_equal_the_sdk_encoders(fake_llm):
    spans = odd_spans() + recorded_spans(fake_llm.base_url)
    assert otlp_encoding.request(spans) == encode_spans(spans).SerializeToString()
    for one in spans:
        assert otlp_encoding.request([one]) == encode_spans([one]).SerializeToString()


def test_values_kept_encoded_stay_apart_by_type():
    """Values equal across types (1, True; 0.0, -0.0; tuples of them) under one name, each
    encoded as its own type however often it recurs."""
    values = [1, True, 1, 1.0, 0.0, -0.0, 0, False, ("stop",), ("stop",), (1,), (True,), "1"]
    spans = [ReadableSpan(f"v{i}", SpanContext(9, 10 + i, False), resource=RESOURCE,
                          attributes={"same.name": value}, kind=SpanKind.CLIENT,
                          status=Status(StatusCode.UNSET))
             for i, value in enumerate(values * 2)]
    for one in spans:
        assert otlp_encoding.request([one]) == encode_spans([one]).SerializeToString()


def raw_receiver(requests: list[bytes]) -> grpc.GenericRpcHandler:
    """The trace service keeping each request's bytes as they arrived."""

    def export(request: bytes, context) -> trace_service_pb2.ExportTraceServiceResponse:
        requests.append(request)
        return trace_service_pb2.ExportTraceServiceResponse()

    return grpc.method_handlers_generic_handler(
        "opentelemetry.proto.collector.trace.v1.TraceService",
        {"Export": grpc.unary_unary_rpc_method_handler(
            export, response_serializer=trace_service_pb2.ExportTraceServiceResponse
            .SerializeToString)})


def test_grpc_receiver_gets_the_sdk_encoding(monkeypatch):
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_PROTOCOL", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", raising=False)
    requests: list[bytes] = []
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1),
                         handlers=[raw_receiver(requests)])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        sender = otlp_exporter(f"http://127.0.0.1:{port}")
        spans = odd_spans()
        assert sender.export(spans) is SpanExportResult.SUCCESS
        sender.shutdown()
    finally:
        server.stop(0)
    assert requests == [encode_spans(spans).SerializeToString()]


@pytest.fixture
def http_receiver():
    posts: list[tuple[str, str, bytes]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            posts.append((self.path, self.headers["Content-Type"],
                          self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", posts
    server.shutdown()
    server.server_close()


def test_http_receiver_gets_the_sdk_encoding(monkeypatch, http_receiver):
    url, posts = http_receiver
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf")
    sender = otlp_exporter(url)
    spans = odd_spans()
    assert sender.export(spans) is SpanExportResult.SUCCESS
    sender.shutdown()
    assert posts == [("/v1/traces", "application/x-protobuf",
                      encode_spans(spans).SerializeToString())]
