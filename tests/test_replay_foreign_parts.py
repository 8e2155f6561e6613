"""Answers recorded by other instrumentations alone (no Rewind code in the agent, spans sent with
the standard OTLP exporter) replay with every part in recorded order: OpenAI Responses (reasoning,
message and function_call items) and Anthropic (thinking, text and tool_use blocks) traced by the
official GenAI instrumentations and OpenLLMetry's, and Gemini (thought, text and function call
parts) traced by the official google-genai instrumentation and OpenLLMetry's; streamed and
not."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from rewind.replay.testing.fakellm import FakeLLMServer
from tests.support.harness import Recording, start_serve

SETUP = """
import os
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

provider = TracerProvider(resource=Resource.create({"service.name": "foreign-agent"}))
provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
trace.set_tracer_provider(provider)
from %(module)s import %(instrumentor)s
%(instrumentor)s().instrument(skip_dep_check=True)  # google-genai 3 is newer than it lists
ask = %(ask)r
"""

RESPONSES = """
import openai
client = openai.OpenAI(base_url=os.environ["LLM_URL"] + "/v1", api_key="sk-x", max_retries=0)
tools = [{"type": "function", "name": "lookup", "parameters": {
    "type": "object", "properties": {"order": {"type": "string"}}}}]

def turn(items, stream):
    if stream:
        with client.responses.stream(model="gpt-4o", input=items, tools=tools) as events:
            for _ in events:
                pass
            return events.get_final_response()
    return client.responses.create(model="gpt-4o", input=items, tools=tools)

with trace.get_tracer("agent").start_as_current_span("run") as root:
    open(os.environ["TRACE_FILE"], "w").write(format(root.get_span_context().trace_id, "032x"))
    for stream in [flag == "1" for flag in os.environ["STREAMS"]]:
        items = [{"role": "user", "content": ask}]
        answer = turn(items, stream)
        print("items:", [(i.type, getattr(i, "name", None), getattr(i, "arguments", None))
                         for i in answer.output])
        print("reasoning:", [s.text for i in answer.output if i.type == "reasoning"
                             for s in i.summary], "| text:", answer.output_text)
        items += [{"type": "message", "role": "assistant", "content": answer.output_text}]
        items += [{"type": "function_call", "call_id": i.call_id, "name": i.name,
                   "arguments": i.arguments} for i in answer.output if i.type == "function_call"]
        items += [{"type": "function_call_output", "call_id": i.call_id, "output": "shipped"}
                  for i in answer.output if i.type == "function_call"]
        print("final:", turn(items, stream).output_text)
"""

GEMINI = """
from google import genai
from google.genai import types
client = genai.Client(api_key="x", http_options=types.HttpOptions(base_url=os.environ["LLM_URL"]))
config = types.GenerateContentConfig(tools=[types.Tool(function_declarations=[
    types.FunctionDeclaration(name="lookup", parameters={
        "type": "object", "properties": {"order": {"type": "string"}}})])])

def turn(contents, stream):
    asked = dict(model="gemini-2.5-flash", contents=contents, config=config)
    if stream:
        return [part for chunk in client.models.generate_content_stream(**asked)
                for part in chunk.candidates[0].content.parts]
    return client.models.generate_content(**asked).candidates[0].content.parts

with trace.get_tracer("agent").start_as_current_span("run") as root:
    open(os.environ["TRACE_FILE"], "w").write(format(root.get_span_context().trace_id, "032x"))
    for stream in [flag == "1" for flag in os.environ["STREAMS"]]:
        contents = [types.Content(role="user", parts=[types.Part(text=ask)])]
        parts = turn(contents, stream)
        print("parts:", [(p.text, bool(p.thought),
                          p.function_call and (p.function_call.name, p.function_call.args))
                         for p in parts])
        contents.append(types.Content(role="model", parts=parts))
        contents.append(types.Content(role="user", parts=[
            types.Part.from_function_response(name="lookup", response={"result": "shipped"})
            for p in parts if p.function_call]))
        print("final:", "".join(p.text or "" for p in turn(contents, stream)))
"""

ANTHROPIC = """
import anthropic
client = anthropic.Anthropic(base_url=os.environ["LLM_URL"], api_key="sk-ant-x", max_retries=0)
tools = [{"name": "lookup", "input_schema": {
    "type": "object", "properties": {"order": {"type": "string"}}}}]

def turn(messages, stream):
    asked = dict(model="claude-haiku-4-5", max_tokens=256, messages=messages, tools=tools,
                 thinking={"type": "enabled", "budget_tokens": 128})
    if stream:
        with client.messages.stream(**asked) as events:
            for _ in events:
                pass
            return events.get_final_message().content
    return client.messages.create(**asked).content

with trace.get_tracer("agent").start_as_current_span("run") as root:
    open(os.environ["TRACE_FILE"], "w").write(format(root.get_span_context().trace_id, "032x"))
    for stream in [flag == "1" for flag in os.environ["STREAMS"]]:
        messages = [{"role": "user", "content": ask}]
        blocks = turn(messages, stream)
        print("blocks:", [(b.type, getattr(b, "thinking", getattr(b, "text", None)),
                           getattr(b, "name", None), getattr(b, "input", None))
                          for b in blocks])
        messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True)
                                                          for b in blocks]})
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": b.id, "content": "shipped"}
            for b in blocks if b.type == "tool_use"]})
        print("final:", [getattr(b, "text", None) for b in turn(messages, stream)])
"""

THINK = 'think "Checking the order." say "One moment." call lookup {"order": "A-17"}'
SAY = 'say "One moment." call lookup {"order": "A-17"}'
CASES = {
    # The official OpenAI instrumentation does not record reasoning items: none is asked for.
    "official-openai-responses": ("opentelemetry.instrumentation.genai.openai",
                                  "OpenAIInstrumentor", RESPONSES, SAY),
    "openllmetry-openai-responses": ("opentelemetry.instrumentation.openai",
                                     "OpenAIInstrumentor", RESPONSES, THINK),
    "official-anthropic": ("opentelemetry.instrumentation.genai.anthropic",
                           "AnthropicInstrumentor", ANTHROPIC, THINK),
    "openllmetry-anthropic": ("opentelemetry.instrumentation.anthropic",
                              "AnthropicInstrumentor", ANTHROPIC, THINK),
    "official-gemini": ("opentelemetry.instrumentation.google_genai",
                        "GoogleGenAiSdkInstrumentor", GEMINI, THINK),
    "openllmetry-gemini": ("opentelemetry.instrumentation.google_generativeai",
                           "GoogleGenerativeAiInstrumentor", GEMINI, THINK),
}
# Calls made plain ("0") and streamed ("1"). OpenLLMetry's Gemini instrumentation keeps only
# the function calls of a streamed answer (neither its text nor its thoughts): there is no
# streamed answer of it to rebuild.
STREAMS = {"openllmetry-gemini": "0"}
CONTENT_ON = {
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY",
    "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
    "TRACELOOP_TRACE_CONTENT": "true",
    "ANTHROPIC_OPEN_TELEMETRY": "false",  # anthropic's own spans are another test's subject
}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """Every case run once against one ``rewind serve``: case -> (Recording, replay env)."""
    tmp = tmp_path_factory.mktemp("foreign-parts")
    served = start_serve(tmp / "store")
    runs = {}
    try:
        with FakeLLMServer() as llm:
            for case, (module, instrumentor, body, ask) in CASES.items():
                pytest.importorskip(module)
                script = tmp / f"{case.replace('-', '_')}.py"
                script.write_text(textwrap.dedent(SETUP % {
                    "module": module, "instrumentor": instrumentor, "ask": ask}) + body)
                env = served.env(LLM_URL=llm.base_url, TRACE_FILE=str(tmp / case),
                                 STREAMS=STREAMS.get(case, "01"), **CONTENT_ON)
                done = subprocess.run([sys.executable, str(script)], env=env,
                                      capture_output=True, text=True, timeout=120)
                assert done.returncode == 0, done.stderr
                trace_id = (tmp / case).read_text()
                runs[case] = Recording(tmp, script, served, {**env, "LLM_URL": "unused"},
                                       trace_id, [], done.stdout, llm, llm.connections)
        for case, recording in runs.items():  # the agent's span and two calls per turn
            recording.spans = served.wait_for_spans(recording.trace_id, 1 + _calls(case))
        yield runs
    finally:
        served.stop()


def _calls(case: str) -> int:
    return 2 * len(STREAMS.get(case, "01"))


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_part_replays_in_recorded_order(recorded, case):
    recording = recorded[case]
    assert "One moment." in recording.output and "lookup" in recording.output
    assert recording.output.count("tool said: ") == _calls(case) // 2
    assert "shipped" in recording.output
    if CASES[case][3] == THINK:
        assert "Checking the order." in recording.output

    replayed = recording.replay(LLM_URL=Recording.dead_url())
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == recording.output
    calls = _calls(case)
    assert f"replayed {calls}/{calls}" in replayed.stderr and "0 live calls" in replayed.stderr
    assert "not replayable" not in replayed.stderr
