"""Rewind recording into a pipeline the application built itself (the SDK's batch processor
and OTLP/gRPC exporter): the receiver gets what Rewind records everywhere else, in the bytes
the SDK's own encoder writes; the application's exporter is its own again after
``uninstrument()``; a pipeline with anything else in it is left as it is."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent import futures

import grpc
import openai
import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rewind import exporter
from rewind.exporter.core import attributes as A

# What differs between two runs of the same calls (the fake model's ids, timings, ports).
VOLATILE = {A.RESPONSE_ID, A.TIME_TO_FIRST_CHUNK, A.RESPONSE_HEADERS, A.RESPONSE_EVENTS}


class Receiver:
    """An OTLP/gRPC trace service keeping each request's bytes as they arrived."""

    def __init__(self) -> None:
        self.requests: list[bytes] = []

        def export(request: bytes, context: grpc.ServicerContext) -> bytes:
            self.requests.append(request)
            return trace_service_pb2.ExportTraceServiceResponse().SerializeToString()

        handler = grpc.method_handlers_generic_handler(
            "opentelemetry.proto.collector.trace.v1.TraceService",
            {"Export": grpc.unary_unary_rpc_method_handler(export)})
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=1),
                                  handlers=[handler])
        self.endpoint = f"http://127.0.0.1:{self.server.add_insecure_port('127.0.0.1:0')}"
        self.server.start()

    def spans(self) -> list[tuple[str, dict[str, object]]]:
        """(name, attributes) of every span received, in order."""
        out = []
        for raw in self.requests:
            request = trace_service_pb2.ExportTraceServiceRequest.FromString(raw)
            for resource in request.resource_spans:
                for scope in resource.scope_spans:
                    out += [(span.name, {kv.key: _value(kv.value) for kv in span.attributes})
                            for span in scope.spans]
        return out


def _value(value: object) -> object:
    kind = value.WhichOneof("value")  # type: ignore[attr-defined]
    if kind == "array_value":
        return tuple(_value(v) for v in value.array_value.values)  # type: ignore[attr-defined]
    return getattr(value, kind) if kind else None


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver()
    yield found
    found.server.stop(0)


def calls(base_url: str) -> None:
    """A plain and a streamed answer, through the real SDK."""
    client = openai.OpenAI(base_url=base_url + "/v1", api_key="sk-app-pipeline", max_retries=0)
    client.chat.completions.create(model="gpt-4o", temperature=0.2, messages=[
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "say \"hi\"\nand\tmore é " + "long " * 2000}])
    list(client.chat.completions.create(model="gpt-4o", stream=True, messages=[
        {"role": "user", "content": "stream"}], stream_options={"include_usage": True}))


def recorded_in_memory(base_url: str) -> list[tuple[str, dict[str, object]]]:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    exporter.instrument(tracer_provider=provider)
    try:
        calls(base_url)
    finally:
        exporter.uninstrument()
    return [(s.name, dict(s.attributes or {})) for s in memory.get_finished_spans()]


def stable(spans: list[tuple[str, dict[str, object]]]) -> list[tuple[str, dict[str, object]]]:
    return [(name, {k: v for k, v in attrs.items() if k not in VOLATILE})
            for name, attrs in spans]


def test_the_applications_receiver_gets_what_rewind_records_in_the_sdks_bytes(
        fake_llm, receiver):
    app_exporter = OTLPSpanExporter(endpoint=receiver.endpoint, insecure=True)
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(app_exporter))
    exporter.instrument(tracer_provider=provider)
    try:
        calls(fake_llm.base_url)
        with provider.get_tracer("the.app").start_as_current_span("app's own") as own:
            own.set_attribute("url.full", "https://example.test/?api_key=sk-live-0123456789ab")
        provider.force_flush()
    finally:
        exporter.uninstrument()

    received = receiver.spans()
    assert [name for name, _ in received] == ["chat gpt-4o", "chat gpt-4o", "app's own"]
    # the content derived, the exchange kept, nothing pending left the process
    assert stable(received[:2]) == stable(recorded_in_memory(fake_llm.base_url))
    assert all(A.INPUT_MESSAGES in attrs and A.ENRICH not in attrs for _, attrs in received[:2])
    # the application's own span leaves as it was made
    assert received[2][1] == {"url.full": "https://example.test/?api_key=sk-live-0123456789ab"}
    # the bytes of the SDK's encoder: canonical protobuf, field by field
    for raw in receiver.requests:
        assert trace_service_pb2.ExportTraceServiceRequest.FromString(
            raw).SerializeToString() == raw

    # after uninstrument() the exporter is as the application built it, and still exports
    assert "_translate_data" not in vars(app_exporter)
    assert type(app_exporter._client).__name__ == "TraceServiceStub"
    with provider.get_tracer("the.app").start_as_current_span("after"):
        pass
    provider.force_flush()
    assert receiver.spans()[-1] == ("after", {})
    provider.shutdown()


def test_spans_still_queued_at_uninstrument_leave_with_their_content(fake_llm, receiver):
    """A script that stops recording before its batch processor's next send: what is queued
    leaves as Rewind records it, not with the exchange alone."""
    app_exporter = OTLPSpanExporter(endpoint=receiver.endpoint, insecure=True)
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(app_exporter, schedule_delay_millis=60_000))
    exporter.instrument(tracer_provider=provider)
    try:
        calls(fake_llm.base_url)
        assert receiver.spans() == []  # nothing sent yet: all of it is queued
    finally:
        exporter.uninstrument()
    provider.shutdown()

    received = receiver.spans()
    assert [name for name, _ in received] == ["chat gpt-4o", "chat gpt-4o"]
    assert all(A.INPUT_MESSAGES in attrs and A.OUTPUT_MESSAGES in attrs
               and A.ENRICH not in attrs for _, attrs in received)


def test_a_pipeline_with_more_in_it_is_left_as_it_is(fake_llm, receiver):
    class Counted(OTLPSpanExporter):
        """The application's own exporter class, encoding as it chooses."""

        translated = 0

        def _translate_data(self, data):  # type: ignore[no-untyped-def]
            Counted.translated += 1
            return super()._translate_data(data)

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Counted(endpoint=receiver.endpoint,
                                                           insecure=True)))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    exporter.instrument(tracer_provider=provider)
    try:
        calls(fake_llm.base_url)
        provider.force_flush()
    finally:
        exporter.uninstrument()
    provider.shutdown()

    assert Counted.translated >= 1
    # every processor saw the content: derived as the call ended
    seen = [(s.name, dict(s.attributes or {})) for s in memory.get_finished_spans()]
    assert stable(receiver.spans()) == stable(seen)
    assert all(A.OUTPUT_MESSAGES in attrs and A.ENRICH not in attrs for _, attrs in seen)
