"""What the exporter promises the service it runs in: calls succeed with the collector down and
memory stays bounded, instrumentation failures stay inside, ``uninstrument()`` restores
everything, and secrets, redacted text and oversized bodies never leave the process."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import subprocess
import sys
import tracemalloc

import anthropic
import httpx
import httpx2
import openai
import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from rewind import exporter
from rewind.exporter import agent, tool
from rewind.exporter.otlp.export_queue import BoundedSpanProcessor
from tests.support import wiretap
from tests.support.ports import free_port as closed_port

KEY = "sk-live-SAFETY-5e6f7a8b9c0d1e2f"
SSN = re.compile(r"\b\d{3}-\d{2}-\d{4}\b")


@pytest.fixture(scope="module")
def llm_process():
    """The fake server in its own process, so this process's memory is the client's alone."""
    child = subprocess.Popen([sys.executable, "-m", "rewind.replay.testing.fakellm", "--port", "0"],
                             stdout=subprocess.PIPE, text=True)
    line = child.stdout.readline()
    assert "listening on" in line, line
    yield line.rsplit(" ", 1)[-1].strip()
    child.terminate()
    child.wait(timeout=10)


def everything_exported(recorded) -> str:
    """Every attribute, status message and event of every span, as one string."""
    parts = []
    for span in recorded.finished():
        parts.append(json.dumps(dict(span.attributes), default=str))
        parts.append(span.status.description or "")
        parts += [json.dumps(dict(e.attributes or {}), default=str) for e in span.events]
    return "\n".join(parts)


def test_collector_unreachable_calls_succeed_and_memory_stays_bounded(llm_process):
    """Memory held while the collector is away is what the queue may hold, one batch being
    sent (its spans and their encoding), and the kept escaped texts: bounded, and the second
    60 calls add nothing to the first 60's (how much of the bound is in use at one moment
    depends on where the sending thread is, which a loaded machine moves)."""
    limit = 512 * 1024
    otlp = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{closed_port()}", insecure=True,
                            timeout=1)
    queue = BoundedSpanProcessor(otlp, max_queue_spans=64, max_queue_bytes=limit,
                                 schedule_delay_millis=50)
    provider = TracerProvider()
    provider.add_span_processor(queue)
    exporter.instrument(tracer_provider=provider)
    client = openai.OpenAI(base_url=llm_process + "/v1", api_key=KEY, max_retries=0)
    prompt = "lorem ipsum " * 2800  # ~33 KB; each span carries it about four times
    grown: list[int] = []
    try:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "w"}])
        tracemalloc.start()
        baseline = tracemalloc.get_traced_memory()[0]
        answered = 0
        for i in range(120):
            reply = client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": f"{i} {prompt}"}])
            answered += reply.choices[0].message.content.startswith(f"echo: {i} lorem")
            del reply
            if i in (59, 119):
                grown.append(tracemalloc.get_traced_memory()[0] - baseline)
        tracemalloc.stop()
        stats = queue.stats()
    finally:
        exporter.uninstrument()
        provider.shutdown()
    assert answered == 120
    # 120 spans of ~130 KB against a 512 KiB queue: every span is dropped, failed or queued.
    assert stats["exported_spans"] == 0 and stats["dropped_spans"] > 0
    assert stats["dropped_spans"] + stats["failed_spans"] + stats["queued_spans"] == 121
    assert stats["queued_bytes"] <= limit
    print(f"client memory grew by {grown} bytes while {120 * 130_000} were recorded")
    # the queue, one batch in flight (spans and encoded request), the kept escaped texts
    # (1 << 19 characters of texts and escaped forms, up to 2 bytes each)
    bound = limit + 2 * limit + 2 * (1 << 19)
    assert max(grown) < bound, f"client memory grew by {grown} bytes"
    assert grown[1] - grown[0] < limit, f"the second 60 calls held more: {grown}"


def test_batches_are_split_under_the_request_size_limit():
    sizes: list[int] = []

    class Sink(SpanExporter):
        def export(self, spans):
            sizes.append(len(spans))
            return SpanExportResult.SUCCESS

        def shutdown(self):
            return None

    queue = BoundedSpanProcessor(Sink(), max_export_bytes=300_000, schedule_delay_millis=10_000)
    provider = TracerProvider()
    provider.add_span_processor(queue)
    tracer = provider.get_tracer("t")
    for _ in range(10):
        with tracer.start_as_current_span("big") as span:
            span.set_attribute("rewind.request.body", "x" * 100_000)
    provider.force_flush()
    assert sizes == [2, 2, 2, 2, 2] and queue.stats()["exported_spans"] == 10
    assert queue.stats()["queued_spans"] == 0 and queue.stats()["queued_bytes"] == 0
    provider.shutdown()


def test_failing_span_processors_never_reach_the_application(fake_llm):
    class Broken(SpanExporter):
        def export(self, spans):
            raise RuntimeError("exporter exploded")

        def shutdown(self):
            return None

    from opentelemetry.sdk.trace import SpanProcessor

    class Exploding(SpanProcessor):
        def on_end(self, span):
            raise RuntimeError("processor exploded")

    provider = TracerProvider()
    provider.add_span_processor(Exploding())
    provider.add_span_processor(BoundedSpanProcessor(Broken(), schedule_delay_millis=10))
    exporter.instrument(tracer_provider=provider)

    @tool
    def double(x: int) -> int:
        return 2 * x

    try:
        client = openai.OpenAI(base_url=fake_llm.base_url + "/v1", api_key=KEY, max_retries=0)
        with agent("fragile"):
            reply = client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "still works"}])
            chunks = list(client.chat.completions.create(
                model="m", stream=True, messages=[{"role": "user", "content": "streamed too"}]))
            assert double(21) == 42
        provider.force_flush()
    finally:
        exporter.uninstrument()
        provider.shutdown()
    assert reply.choices[0].message.content == "echo: still works"
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == (
        "echo: streamed too")


def test_uninstrument_restores_the_http_libraries(fake_llm):
    originals = {m: (m.Client._send_single_request, m.AsyncClient._send_single_request)
                 for m in (httpx, httpx2)}
    recorded = wiretap.Spans()
    exporter.instrument(tracer_provider=recorded.provider)
    assert exporter.is_instrumented()
    assert httpx2.Client._send_single_request is not originals[httpx2][0]

    @tool
    def ping() -> str:
        return "pong"

    exporter.uninstrument()
    assert not exporter.is_instrumented()
    for module, (sync_send, async_send) in originals.items():
        assert module.Client._send_single_request is sync_send
        assert module.AsyncClient._send_single_request is async_send
    openai.OpenAI(base_url=fake_llm.base_url + "/v1", api_key=KEY).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "after"}])
    assert ping() == "pong"
    assert recorded.finished() == []


def test_api_keys_appear_in_no_exported_span(spans, fake_llm):
    base = fake_llm.base_url
    openai.OpenAI(base_url=base + "/v1", api_key=KEY).chat.completions.create(
        model="m", messages=[{"role": "user", "content": f"my key is {KEY}, keep it"}])
    anthropic.Anthropic(base_url=base, api_key=KEY).messages.create(
        model="c", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
    with httpx.Client() as plain:  # Gemini-style key in the query string and a header
        plain.post(f"{base}/v1beta/models/gemini-2.5-flash:generateContent?key={KEY}",
                   headers={"x-goog-api-key": KEY}, json={"contents": []})
        plain.post(f"{base}/v1/chat/completions", headers={"api-key": KEY,
                                                            "cookie": f"session={KEY}"},
                   json={"model": "m", "messages": [{"role": "user", "content": "azure"}]})
    with pytest.raises(httpx.ConnectError), httpx.Client() as plain:
        plain.post(f"http://127.0.0.1:{closed_port()}/v1/embeddings?api_key={KEY}",
                   json={"model": "e", "input": "x"})
    dump = everything_exported(spans)
    assert len(spans.llm()) == 5
    assert KEY not in dump and "Bearer" not in dump
    prompt = json.loads(spans.llm()[0].attributes["gen_ai.input.messages"])
    assert prompt[0]["parts"][0]["content"] == "my key is [REDACTED], keep it"
    failed = spans.llm()[-1]
    assert failed.status.status_code.name == "ERROR"
    assert failed.attributes["error.type"] == "ConnectError"
    assert "rewind.response.status" not in failed.attributes


def test_redaction_patterns_reach_bodies_streams_and_content(fake_llm):
    recorded = wiretap.Spans()
    exporter.instrument(tracer_provider=recorded.provider, redact=[SSN.pattern])
    try:
        client = openai.OpenAI(base_url=fake_llm.base_url + "/v1", api_key=KEY)
        client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "ssn 123-45-6789 please"}])
        list(client.chat.completions.create(
            model="m", stream=True, messages=[{"role": "user", "content": "ssn 987-65-4321"}]))
    finally:
        exporter.uninstrument()
    dump = everything_exported(recorded)
    assert not SSN.search(dump)
    plain, streamed = recorded.llm()
    assert "[REDACTED]" in plain.attributes["rewind.request.body"]
    assert "[REDACTED]" in plain.attributes["rewind.response.body"]
    assert "[REDACTED]" in plain.attributes["gen_ai.output.messages"]
    assert "[REDACTED]" in streamed.attributes["rewind.response.events"]


@pytest.mark.parametrize("mode", ["content", "metadata"])
def test_capture_modes(fake_llm, mode):
    recorded = wiretap.Spans()
    exporter.instrument(tracer_provider=recorded.provider, capture=mode)

    @tool
    def lookup(q: str) -> str:
        return "found " + q

    try:
        client = openai.OpenAI(base_url=fake_llm.base_url + "/v1", api_key=KEY)
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "zebra"}])
        lookup("zebra")
    finally:
        exporter.uninstrument()
    llm, = recorded.llm()
    [tool_span] = recorded.named("execute_tool")
    for span in (llm, tool_span):
        for name in ("rewind.request.body", "rewind.response.body", "rewind.tool.arguments",
                     "rewind.tool.result"):
            assert name not in span.attributes
    assert llm.attributes["gen_ai.usage.input_tokens"] > 0
    assert llm.attributes["rewind.step"] == 0
    if mode == "content":
        assert llm.attributes["rewind.match_key"]
        assert "zebra" in llm.attributes["gen_ai.input.messages"]
        assert tool_span.attributes["gen_ai.tool.call.result"] == '"found zebra"'
    else:  # without REWIND_MATCH_KEY_SALT no key: it would confirm a guessed prompt
        assert "rewind.match_key" not in llm.attributes
        assert "zebra" not in everything_exported(recorded)


def test_bodies_over_the_limit_are_not_captured(fake_llm):
    recorded = wiretap.Spans()
    exporter.instrument(tracer_provider=recorded.provider, max_body_bytes=10_000)
    try:
        reply = openai.OpenAI(base_url=fake_llm.base_url + "/v1", api_key=KEY)\
            .chat.completions.create(model="m", messages=[{"role": "user",
                                                             "content": "big " * 5000}])
    finally:
        exporter.uninstrument()
    assert reply.choices[0].message.content.startswith("echo: big")
    span, = recorded.llm()
    assert "rewind.request.body" not in span.attributes
    assert "rewind.response.body" not in span.attributes
    assert "exceeds 10000" in span.attributes["rewind.capture_error"]
    assert "gen_ai.input.messages" not in span.attributes


def test_body_that_is_not_utf8_is_kept_as_base64(spans, fake_llm):
    raw = b'{"model": "m", "messages": "\xff\xfe"}'

    async def send() -> int:
        async with httpx2.AsyncClient() as client:
            response = await client.post(fake_llm.base_url + "/v1/chat/completions",
                                         content=raw)
            return response.status_code

    assert asyncio.run(send()) == 400
    span, = spans.llm()
    assert span.attributes["rewind.request.body_encoding"] == "base64"
    assert base64.b64decode(span.attributes["rewind.request.body"]) == raw
    assert span.attributes["rewind.response.status"] == 400
    assert span.status.status_code.name == "ERROR" and span.attributes["error.type"] == "400"
