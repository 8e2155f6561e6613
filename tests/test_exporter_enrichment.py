"""Semconv attributes derived at export (the pipeline ``instrument()`` builds) equal those
derived inline (a pipeline the application built), for every provider and mode."""

from __future__ import annotations

import json

import anthropic
import openai
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rewind import exporter
from rewind.exporter import agent, tool
from rewind.exporter.otlp.otel_pipeline import build_provider
from tests.support import wiretap

genai = pytest.importorskip("google.genai")

KEY = "sk-enrich-SECRET-77aa88bb99cc"
VOLATILE = {"gen_ai.response.time_to_first_chunk", "rewind.response.events"}


def scenario(base_url: str) -> None:
    @tool
    def get_weather(city: str) -> str:
        return "cloudy"

    oai = openai.OpenAI(base_url=base_url + "/v1", api_key=KEY, max_retries=0)
    ant = anthropic.Anthropic(base_url=base_url, api_key=KEY, max_retries=0)
    gem = genai.Client(api_key=KEY, http_options=genai.types.HttpOptions(
        base_url=base_url, api_version="v1beta"))
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}]
    with agent("enrich", conversation_id="conv-e"):
        first = oai.chat.completions.create(
            model="gpt-4o", tools=tools,
            messages=[{"role": "user", "content": 'call get_weather {"city": "Rome"} ' + KEY}])
        get_weather(**json.loads(first.choices[0].message.tool_calls[0].function.arguments))
        list(oai.chat.completions.create(model="gpt-4o", stream=True,
                                         messages=[{"role": "user", "content": "stream it"}]))
        oai.responses.create(model="gpt-4.1", input="respond", instructions="short")
        oai.embeddings.create(model="emb", input="vector")
        with ant.messages.stream(model="claude-x", max_tokens=30, system="sys",
                                 messages=[{"role": "user", "content": "anthropic"}]) as s:
            s.get_final_message()
        list(gem.models.generate_content_stream(model="gemini-2.5-flash", contents="gemini"))


def recorded(provider, memory_spans, leave_out=VOLATILE) -> list[dict]:
    exporter.instrument(tracer_provider=provider, redact=[r"Rome"])
    try:
        scenario(recorded.base_url)
        provider.force_flush()
    finally:
        exporter.uninstrument()
    out = []
    for span in sorted(memory_spans(), key=lambda s: s.attributes.get("rewind.step", -1)):
        if "rewind.step" in span.attributes:
            out.append({"span name": span.name,
                        **{k: v for k, v in span.attributes.items() if k not in leave_out}})
    return out


def test_derived_at_export_equals_derived_inline(fake_llm):
    recorded.base_url = fake_llm.base_url
    inline = wiretap.Spans()
    memory = InMemorySpanExporter()
    at_export = build_provider("enrich-test", span_exporter=memory)
    first = recorded(inline.provider, inline.finished)
    second = recorded(at_export, memory.get_finished_spans)
    at_export.shutdown()
    assert len(first) == len(second) == 7
    for a, b in zip(first, second, strict=True):
        assert a == b
        assert "rewind.enrich" not in b
    assert "gen_ai.output.messages" in second[0] and "gen_ai.input.messages" in second[0]
    assert second[0]["span name"] == "chat gpt-4o"  # named after the model read at export
    assert second[1]["gen_ai.tool.call.id"] == json.loads(
        second[0]["gen_ai.output.messages"])[0]["parts"][0]["id"]
    dump = json.dumps(second)
    assert KEY not in dump and "Rome" not in dump


def test_a_recorded_answer_reads_back_as_the_exporter_derived_it(fake_llm):
    """Replay and diffs decode a recorded body with the exporter's own decoder: the answer's
    gen_ai.* attributes come back equal to those the span was recorded with."""
    from rewind.replay.cassette.build import build_cassette

    recorded.base_url = fake_llm.base_url
    inline = wiretap.Spans()
    spans = recorded(inline.provider, inline.finished, leave_out=())
    spans = [{k: v for k, v in attrs.items() if k != "span name"} for attrs in spans]
    rows = [{"SpanId": f"{n:016x}", "SpanName": "call", "SpanAttributes": attrs}
            for n, attrs in enumerate(spans)]
    llm = [i for i in build_cassette("ab" * 16, rows).interactions if i.kind == "llm"]
    assert len(llm) == 6 and sum(i.streamed for i in llm) == 3
    for interaction, attrs in zip(llm, [a for a in spans if a.get("rewind.kind") == "llm"],
                                  strict=True):
        read = interaction.response_attributes()
        assert read and "gen_ai.response.model" in read, interaction.url
        as_recorded = {k: list(v) if isinstance(v, tuple) else v for k, v in attrs.items()}
        assert read == {k: as_recorded[k] for k in read}, interaction.url


def test_content_derived_by_the_collector_is_stored_as_derived_here(fake_llm, store, tmp_path):
    """``REWIND_CONTENT_AT=collector`` under the application's own pipeline: the spans leave
    with the exchange only, and the collector stores the rows the process would have."""
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    from rewind.collector.ingest.service import start_ingest
    from rewind.collector.store.server_settings import BatchPolicy, IngestOptions

    ingest = start_ingest(store, IngestOptions(
        grpc_port=0, http_port=0, spool_dir=tmp_path / "spool",
        batch=BatchPolicy(timeout_s=0.05, convert_workers=1)))
    sent = {}
    try:
        for where in ("process", "collector"):
            provider = TracerProvider(resource=Resource({"service.name": f"app-{where}"}))
            provider.add_span_processor(BatchSpanProcessor(
                OTLPSpanExporter(endpoint=ingest.grpc_endpoint, insecure=True)))
            memory = InMemorySpanExporter()
            provider.add_span_processor(SimpleSpanProcessor(memory))
            exporter.instrument(tracer_provider=provider, content_at=where)
            try:
                scenario(fake_llm.base_url)
            finally:
                exporter.uninstrument()
                provider.shutdown()
            sent[where] = [s for s in memory.get_finished_spans() if "rewind.step" in s.attributes]
        assert ingest.flush()
    finally:
        ingest.stop()
    # What left the process: the exchange, and the parts the collector is to derive.
    llm_sent = [s for s in sent["collector"] if s.attributes.get("rewind.kind") == "llm"]
    assert len(llm_sent) == 6
    assert all("rewind.enrich" in s.attributes for s in llm_sent)
    assert not any("gen_ai.input.messages" in s.attributes for s in llm_sent)
    assert all("rewind.enrich" not in s.attributes for s in sent["process"])

    def stored(where: str) -> list[dict]:
        rows = store.query(
            "SELECT SpanName, SpanAttributes FROM otel_traces WHERE ServiceName = "
            f"'app-{where}' AND has(mapKeys(SpanAttributes), 'rewind.step') "
            "ORDER BY toUInt32(SpanAttributes['rewind.step'])")
        return [{"span name": r["SpanName"], **{k: v for k, v in r["SpanAttributes"].items()
                                                 if k not in VOLATILE}} for r in rows]

    here, there = stored("process"), stored("collector")
    assert len(here) == len(there) == 7
    for a, b in zip(here, there, strict=True):
        assert a == b
    assert there[0]["span name"] == "chat gpt-4o" and "gen_ai.input.messages" in there[0]
    assert not any("rewind.enrich" in row for row in there)
    assert KEY not in json.dumps(there)


def test_the_collector_keeps_a_span_whose_pending_content_cannot_be_derived():
    from rewind.collector.conventions.pending_content import derive_pending

    attrs = {"rewind.enrich": "request,response", "rewind.kind": "llm",
             "rewind.request.url": "https://api.openai.com/v1/chat/completions",
             "rewind.request.body": "{not json", "rewind.response.events": "[1]"}
    name, out = derive_pending("POST", attrs)  # events that are not (offset, text) pairs
    assert name == "POST"
    assert out == {k: v for k, v in attrs.items() if k != "rewind.enrich"}


def test_content_at_rejects_a_value_it_does_not_know():
    from rewind.exporter.core.process_settings import settings

    with pytest.raises(ValueError, match="content_at must be one of process, collector"):
        settings(content_at="elsewhere")
    assert settings(environ={"REWIND_CONTENT_AT": "nowhere"}).content_at == "process"
    assert not settings(environ={"REWIND_CONTENT_AT": "collector"},
                        redact=["x"]).derives_in_collector


def test_rewinds_own_pipeline_leaves_the_content_to_the_collector_too(fake_llm):
    memory = InMemorySpanExporter()
    provider = build_provider("enrich-collector", span_exporter=memory)
    exporter.instrument(tracer_provider=provider, content_at="collector")
    try:
        oai = openai.OpenAI(base_url=fake_llm.base_url + "/v1", api_key=KEY, max_retries=0)
        oai.chat.completions.create(model="gpt-4o",
                                    messages=[{"role": "user", "content": "plain"}])
        provider.force_flush()
    finally:
        exporter.uninstrument()
        provider.shutdown()
    (call,) = [s for s in memory.get_finished_spans() if s.attributes.get("rewind.kind") == "llm"]
    assert call.attributes["rewind.enrich"] == "request,response"
    assert "gen_ai.input.messages" not in call.attributes
    assert "rewind.match_key" not in call.attributes
