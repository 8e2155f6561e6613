"""A trace written by the official OpenTelemetry GenAI instrumentation alone (no Rewind code in
the agent) replays through ``rewind-replay``: responses are rebuilt from message content."""

from __future__ import annotations

import textwrap

import pytest

from tests.support.harness import record_script

pytest.importorskip("opentelemetry.instrumentation.genai.openai")

AGENT = textwrap.dedent(
    """
    import json, os
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.instrumentation.genai.openai import OpenAIInstrumentor
    import openai

    provider = TracerProvider(resource=Resource.create({"service.name": "plain-otel-agent"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    OpenAIInstrumentor().instrument()

    client = openai.OpenAI(base_url=os.environ["LLM_URL"] + "/v1", api_key="sk-x", max_retries=0)
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}}}}]
    city = os.environ.get("CITY", "Paris")
    with trace.get_tracer("agent").start_as_current_span("run") as root:
        open(os.environ["TRACE_FILE"], "w").write(format(root.get_span_context().trace_id, "032x"))
        messages = [{"role": "system", "content": "Use tools."},
                    {"role": "user", "content": 'call get_weather {"city": "%s"}' % city}]
        first = client.chat.completions.create(model="gpt-4o", messages=messages, tools=tools)
        call = first.choices[0].message.tool_calls[0]
        print("tool:", call.function.name, call.function.arguments)
        messages.append(first.choices[0].message.model_dump(exclude_none=True))
        messages.append({"role": "tool", "tool_call_id": call.id, "content": "sunny, 21C"})
        stream = client.chat.completions.create(model="gpt-4o", messages=messages, tools=tools,
                                                stream=True)
        print("final:", "".join(c.choices[0].delta.content or "" for c in stream if c.choices))
    """
)


def test_official_instrumentation_trace_replays_with_same_answer(tmp_path):
    recorded = record_script(
        tmp_path, AGENT, 3,
        OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="SPAN_ONLY",
        OTEL_SEMCONV_STABILITY_OPT_IN="gen_ai_latest_experimental",
    )
    try:
        assert not any("rewind.step" in s["SpanAttributes"] for s in recorded.spans)
        assert "final: tool said: sunny, 21C" in recorded.output

        cassette = recorded.served.get(f"/v1/traces/{recorded.trace_id}/cassette").json()
        assert [i["synthetic"] is not None for i in cassette["interactions"]] == [True, True]

        replayed = recorded.replay()
        assert replayed.returncode == 0, replayed.stderr
        assert replayed.stdout == recorded.output
        assert "replayed 2/2" in replayed.stderr and "0 live calls" in replayed.stderr
        assert recorded.llm.connections == recorded.connections

        diverged = recorded.replay(CITY="Rome")
        assert diverged.returncode == 3
        assert "diverged at step 0" in diverged.stderr
        assert "messages[1].parts[0].content" in diverged.stderr
    finally:
        recorded.served.stop()
