"""Traces written by other instrumentations alone (no Rewind code in the agent, spans sent with
the standard OTLP exporter) replay with identical output, when the model writes text beside
its tool calls, streamed and not: the official GenAI instrumentations for OpenAI and Anthropic,
OpenLLMetry's for both and OpenInference's (Arize Phoenix) for OpenAI."""

from __future__ import annotations

import textwrap

import pytest

from tests.support.harness import record_script

SETUP = """
import json, os, sys
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

provider = TracerProvider(resource=Resource.create({"service.name": "foreign-agent"}))
provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
trace.set_tracer_provider(provider)
from %(module)s import %(instrumentor)s
%(instrumentor)s().instrument()
city = os.environ.get("CITY", "Paris")
ask = 'say "Let me look that up." call get_weather {"city": "%%s"}' %% city
"""

OPENAI = """
import openai
client = openai.OpenAI(base_url=os.environ["LLM_URL"] + "/v1", api_key="sk-x", max_retries=0)
tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}]

def turn(messages, stream):
    if not stream:
        message = client.chat.completions.create(model="gpt-4o", messages=messages,
                                                 tools=tools).choices[0].message
        return message.content, [(c.id, c.function.name, c.function.arguments)
                                 for c in message.tool_calls or []]
    text, calls = "", {}
    for chunk in client.chat.completions.create(model="gpt-4o", messages=messages,
                                                tools=tools, stream=True):
        delta = chunk.choices[0].delta if chunk.choices else None
        text += (delta and delta.content) or ""
        for c in (delta and delta.tool_calls) or []:
            seen = calls.setdefault(c.index, [c.id, c.function.name, ""])
            seen[2] += c.function.arguments or ""
    return text, [tuple(c) for c in calls.values()]

with trace.get_tracer("agent").start_as_current_span("run") as root:
    open(os.environ["TRACE_FILE"], "w").write(format(root.get_span_context().trace_id, "032x"))
    for stream in (False, True):
        messages = [{"role": "system", "content": "Use tools."},
                    {"role": "user", "content": ask}]
        text, calls = turn(messages, stream)
        print("said:", text, "| calls:", [(n, a) for _, n, a in calls])
        messages.append({"role": "assistant", "content": text, "tool_calls": [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
            for i, n, a in calls]})
        messages += [{"role": "tool", "tool_call_id": i, "content": "sunny, 21C"}
                     for i, _, _ in calls]
        print("final:", turn(messages, stream)[0])
"""

ANTHROPIC = """
import anthropic
client = anthropic.Anthropic(base_url=os.environ["LLM_URL"], api_key="sk-ant-x", max_retries=0)
tools = [{"name": "get_weather", "input_schema": {
    "type": "object", "properties": {"city": {"type": "string"}}}}]

def turn(messages, stream):
    asked = dict(model="claude-haiku-4-5", max_tokens=256, system="Use tools.",
                 messages=messages, tools=tools)
    if stream:
        with client.messages.stream(**asked) as events:
            for _ in events:
                pass
            return events.get_final_message().content
    return client.messages.create(**asked).content

with trace.get_tracer("agent").start_as_current_span("run") as root:
    open(os.environ["TRACE_FILE"], "w").write(format(root.get_span_context().trace_id, "032x"))
    for stream in (False, True):
        messages = [{"role": "user", "content": ask}]
        blocks = turn(messages, stream)
        print("blocks:", [(b.type, getattr(b, "text", getattr(b, "name", None)),
                           getattr(b, "input", None))
                          for b in blocks])
        messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True)
                                                          for b in blocks]})
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": b.id, "content": "sunny, 21C"}
            for b in blocks if b.type == "tool_use"]})
        print("final:", [getattr(b, "text", None) for b in turn(messages, stream)])
"""

CASES = {
    "official-openai": ("opentelemetry.instrumentation.genai.openai", OPENAI),
    "official-anthropic": ("opentelemetry.instrumentation.genai.anthropic", ANTHROPIC),
    "openllmetry-openai": ("opentelemetry.instrumentation.openai", OPENAI),
    "openllmetry-anthropic": ("opentelemetry.instrumentation.anthropic", ANTHROPIC),
    "openinference-openai": ("openinference.instrumentation.openai", OPENAI),
}
CONTENT_ON = {
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY",
    "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
    "TRACELOOP_TRACE_CONTENT": "true",
    # anthropic's own spans carry no content; they are another test's subject.
    "ANTHROPIC_OPEN_TELEMETRY": "false",
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_mixed_text_and_tool_call_answers_replay_identically(tmp_path, case):
    module, body = CASES[case]
    pytest.importorskip(module)
    instrumentor = "OpenAIInstrumentor" if "openai" in case else "AnthropicInstrumentor"
    source = textwrap.dedent(SETUP % {"module": module, "instrumentor": instrumentor}) + body
    recorded = record_script(tmp_path, source, 5, **CONTENT_ON)
    try:
        assert "Let me look that up." in recorded.output
        assert "get_weather" in recorded.output and "tool said: sunny, 21C" in recorded.output

        replayed = recorded.replay()
        assert replayed.returncode == 0, replayed.stderr
        assert replayed.stdout == recorded.output
        assert "replayed 4/4" in replayed.stderr and "0 live calls" in replayed.stderr
        assert recorded.llm.connections == recorded.connections
    finally:
        recorded.served.stop()
