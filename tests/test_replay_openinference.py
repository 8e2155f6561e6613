"""An agent instrumented with OpenInference (Arize Phoenix's ``OpenAIInstrumentor``) and the
real openai SDK, tool calls streamed and not: recorded alone (its spans sent with the standard
OTLP exporter, no Rewind code) and beside Rewind (``rewind record``), each trace replays three
times with identical output offline, and ``inspect`` and ``stats`` count each call and its
tokens once: as many calls as the fake LLM answered."""

from __future__ import annotations

import json
import re
import sys
import textwrap
import time

import openinference.instrumentation.openai  # noqa: F401  (a dev dependency: never skipped)
import pytest

from rewind.replay.testing.fakellm import FakeLLMServer
from tests.support.cli import rewind
from tests.support.harness import Recording, start_serve

ALONE = """
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
provider = TracerProvider()
provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
trace.set_tracer_provider(provider)
import atexit
run = trace.get_tracer("agent").start_as_current_span("run")  # one trace for the run
run.__enter__()
atexit.register(run.__exit__, None, None, None)
"""

AGENT = """
import os
import openai
from openinference.instrumentation.openai import OpenAIInstrumentor
OpenAIInstrumentor().instrument()

client = openai.OpenAI(base_url=os.environ["LLM_URL"] + "/v1", api_key="sk-x", max_retries=0)
tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}]
ask = 'say "Let me look that up." call get_weather {"city": "Paris"}'

def turn(messages, stream):
    if not stream:
        message = client.chat.completions.create(model="gpt-4o", messages=messages,
                                                 tools=tools).choices[0].message
        return message.content, [(c.id, c.function.name, c.function.arguments)
                                 for c in message.tool_calls or []]
    text, calls = "", {}
    for chunk in client.chat.completions.create(
            model="gpt-4o", messages=messages, tools=tools, stream=True,
            stream_options={"include_usage": True}):
        delta = chunk.choices[0].delta if chunk.choices else None
        text += (delta and delta.content) or ""
        for c in (delta and delta.tool_calls) or []:
            seen = calls.setdefault(c.index, [c.id, c.function.name, ""])
            seen[2] += c.function.arguments or ""
    return text, [tuple(c) for c in calls.values()]

for stream in (False, True):
    messages = [{"role": "system", "content": "Use tools."}, {"role": "user", "content": ask}]
    text, calls = turn(messages, stream)
    print("said:", text, "| calls:", [(n, a) for _, n, a in calls])
    messages.append({"role": "assistant", "content": text, "tool_calls": [
        {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
        for i, n, a in calls]})
    messages += [{"role": "tool", "tool_call_id": i, "content": "sunny, 21C"}
                 for i, _, _ in calls]
    print("final:", turn(messages, stream)[0])
"""

CALLS = 4
MODES = {"alone": ("openinference-alone", 5), "beside-rewind": ("openinference-beside", 9)}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Each mode recorded once into one store: its trace id, output and the requests the fake
    LLM answered; and the environment a replay runs in (no LLM to reach)."""
    tmp = tmp_path_factory.mktemp("openinference")
    (tmp / "alone.py").write_text(textwrap.dedent(ALONE) + textwrap.dedent(AGENT))
    (tmp / "beside-rewind.py").write_text(textwrap.dedent(AGENT))
    served = start_serve(tmp / "store")
    try:
        recorded = {}
        for mode, (service, spans) in MODES.items():
            with FakeLLMServer() as llm:
                env = served.env(LLM_URL=llm.base_url, OTEL_SERVICE_NAME=service)
                args = (("alone.py",) if mode == "alone" else
                        ("record", "--", sys.executable, "beside-rewind.py"))
                done = rewind(*args, cwd=tmp, env=env,
                              program="python" if mode == "alone" else "rewind")
                assert done.returncode == 0, done.stderr
                asked = len(llm.requests)
            trace_id = _trace_of(served, service, spans)
            recorded[mode] = (trace_id, done.stdout, asked)
        # replays are counted apart (a replayed run's own exporter marks nothing as a replay)
        yield served, tmp, {**env, "LLM_URL": Recording.dead_url(),
                            "OTEL_SERVICE_NAME": "replayed"}, recorded
    finally:
        served.stop()


def _trace_of(served, service: str, spans: int, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while True:
        traces = served.get(f"/v1/traces?service={service}").json()["traces"]
        if sum(t["Spans"] for t in traces) >= spans or time.monotonic() > deadline:
            assert len(traces) == 1, traces
            return traces[0]["TraceId"]
        time.sleep(0.2)


@pytest.mark.parametrize("mode", sorted(MODES))
def test_replays_three_times_identically_offline(runs, mode):
    _, tmp, env, recorded = runs
    trace_id, output, asked = recorded[mode]
    assert asked == CALLS
    assert "Let me look that up." in output and "tool said: sunny, 21C" in output
    for _ in range(3):
        replayed = rewind("replay", "--trace-id", trace_id, "--", sys.executable,
                          f"{mode}.py", cwd=tmp, env=env)
        assert replayed.returncode == 0, replayed.stderr
        assert replayed.stdout == output
        assert f"replayed {CALLS}/{CALLS}" in replayed.stderr
        assert "0 live calls" in replayed.stderr


@pytest.mark.parametrize("mode", sorted(MODES))
def test_inspect_and_stats_count_each_call_once(runs, mode):
    served, _, env, recorded = runs
    trace_id, _, asked = recorded[mode]
    inspected = rewind("inspect", trace_id, "--json", env=env)
    assert inspected.returncode == 0, inspected.stderr
    shown = json.loads(inspected.stdout)
    assert shown["totals"]["llm_calls"] == asked and shown["skipped"] == []
    assert shown["totals"]["input_tokens"] > 0

    stats = rewind("stats", "--service", MODES[mode][0], "--json", env=env)
    assert stats.returncode == 0, stats.stderr
    total = json.loads(stats.stdout)["total"]
    assert total["calls"] == asked
    assert total["input_tokens"] == shown["totals"]["input_tokens"]
    [listed] = served.get(f"/v1/traces?service={MODES[mode][0]}").json()["traces"]
    assert listed["LlmCalls"] == asked


def test_a_span_says_what_it_was_read_as(runs):
    """The OpenInference span of a call keeps its own attributes beside the GenAI ones."""
    served, _, _, recorded = runs
    spans = served.get(f"/v1/traces/{recorded['alone'][0]}").json()["spans"]
    read = [s["SpanAttributes"] for s in spans
            if s["SpanAttributes"].get("openinference.span.kind") == "LLM"]
    assert len(read) == CALLS
    for attrs in read:
        assert attrs["gen_ai.operation.name"] == "chat"
        assert attrs["gen_ai.request.model"] == "gpt-4o"
        assert re.match(r"gpt-4o-\d{4}", attrs["gen_ai.response.model"])
        assert json.loads(attrs["gen_ai.input.messages"])[0]["role"] == "system"
        assert "llm.input_messages.0.message.role" in attrs


def test_flattened_messages_are_read_when_the_input_is_no_provider_json():
    """OpenInference instrumentations of frameworks (and the JS ones, with their options) may
    leave ``input.value`` as text: the flattened messages, tools and usage are read then; an
    embedding, a tool and an agent span get their operation."""
    from rewind.collector.conventions.openinference import read_openinference
    from rewind.replay.cassette.build import build_cassette

    llm = {"openinference.span.kind": "LLM", "llm.provider": "openai",
           "llm.model_name": "gpt-4o-mini", "input.value": "what is the weather in Paris",
           "input.mime_type": "text/plain",
           "llm.input_messages.0.message.role": "user",
           "llm.input_messages.0.message.contents.0.message_content.type": "text",
           "llm.input_messages.0.message.contents.0.message_content.text": "weather in Paris?",
           "llm.output_messages.0.message.role": "assistant",
           "llm.output_messages.0.message.tool_calls.0.tool_call.id": "call_1",
           "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "get_weather",
           "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments":
               '{"city": "Paris"}',
           "llm.tools.0.tool.json_schema": json.dumps(
               {"type": "function", "function": {"name": "get_weather"}}),
           "llm.token_count.prompt": "9", "llm.token_count.completion": "4"}
    read = read_openinference(llm)
    assert read["gen_ai.operation.name"] == "chat" and read["gen_ai.usage.input_tokens"] == "9"
    assert json.loads(read["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "weather in Paris?"}]}]
    assert json.loads(read["gen_ai.tool.definitions"])[0]["name"] == "get_weather"
    span = {"TraceId": "ab" * 16, "SpanId": "s1", "ParentSpanId": "", "SpanName": "ChatOpenAI",
            "ScopeName": "openinference.instrumentation.langchain", "StartNs": 1,
            "Duration": 5, "SpanAttributes": read}
    [step] = build_cassette("ab" * 16, [span]).interactions
    [call] = step.synthetic["parts"]
    assert (call["name"], call["arguments"]) == ("get_weather", {"city": "Paris"})

    kinds = {"EMBEDDING": {"embedding.model_name": "text-embedding-3-small"},
             "TOOL": {"tool.name": "get_weather", "tool.parameters": '{"city": "Paris"}'},
             "AGENT": {"agent.name": "planner"}, "CHAIN": {}}
    read = {k: read_openinference({"openinference.span.kind": k, **v}) for k, v in kinds.items()}
    assert read["EMBEDDING"]["gen_ai.operation.name"] == "embeddings"
    assert read["EMBEDDING"]["gen_ai.request.model"] == "text-embedding-3-small"
    assert (read["TOOL"]["gen_ai.operation.name"], read["TOOL"]["gen_ai.tool.name"]) == (
        "execute_tool", "get_weather")
    assert read["AGENT"]["gen_ai.agent.name"] == "planner"
    assert "gen_ai.operation.name" not in read["CHAIN"]
