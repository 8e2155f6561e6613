"""The contrib GenAI instrumentation for OpenAI with content captured as events only: its spans
carry no messages, its log records do (``gen_ai.client.inference.operation.details``). Sent to
the collector over OTLP/gRPC beside the spans (HTTP's ``/v1/logs``: ``test_collector_logs``),
they are stored in
``otel_logs`` and joined to their spans when the cassette is built: the run replays three times
with identical output offline, tool calls streamed and not. Without its logs a call is skipped
with a reason that says where content was looked for."""

from __future__ import annotations

import re
import textwrap
import time

import pytest

from tests.support.harness import record_script

pytest.importorskip("opentelemetry.instrumentation.genai.openai")

SETUP = """
import os
from opentelemetry import _logs, trace
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
provider = TracerProvider()
provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
trace.set_tracer_provider(provider)
if os.environ.get("SEND_LOGS", "1") == "1":
    log_provider = LoggerProvider()
    log_provider.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter()))
    _logs.set_logger_provider(log_provider)
from opentelemetry.instrumentation.genai.openai import OpenAIInstrumentor
OpenAIInstrumentor().instrument()
"""

AGENT = """
import openai
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
EVENTS_ONLY = {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "EVENT_ONLY",
               "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental"}


def _recorded(tmp_path, send_logs: str = "1"):
    source = textwrap.dedent(SETUP) + textwrap.dedent(AGENT)
    return record_script(tmp_path, source, 5, SEND_LOGS=send_logs, **EVENTS_ONLY)


def _cassette(recorded, timeout: float = 30) -> dict:
    """The trace's cassette once every call in it is replayable (logs land beside spans)."""
    deadline = time.monotonic() + timeout
    while True:
        cassette = recorded.served.get(f"/v1/traces/{recorded.trace_id}/cassette").json()
        if len(cassette["interactions"]) == 4 or time.monotonic() > deadline:
            return cassette
        time.sleep(0.3)


def test_content_sent_as_log_records_replays_three_times(tmp_path):
    recorded = _recorded(tmp_path)
    try:
        assert "Let me look that up." in recorded.output
        assert "tool said: sunny, 21C" in recorded.output
        cassette = _cassette(recorded)
        assert len(cassette["interactions"]) == 4 and cassette["skipped"] == []
        for _ in range(3):
            replayed = recorded.replay()
            assert replayed.returncode == 0, replayed.stderr
            assert replayed.stdout == recorded.output
            assert "replayed 4/4" in replayed.stderr and "0 live calls" in replayed.stderr
        assert recorded.llm.connections == recorded.connections
    finally:
        recorded.served.stop()


def test_without_its_logs_a_call_is_skipped_saying_where_content_was_looked_for(tmp_path):
    recorded = _recorded(tmp_path, send_logs="0")
    try:
        cassette = recorded.served.get(f"/v1/traces/{recorded.trace_id}/cassette").json()
        assert cassette["interactions"] == [] and len(cassette["skipped"]) == 4
        reason = cassette["skipped"][0]["reason"]
        assert re.search(r"gen_ai\.input\.messages.*events.*log records of its trace and span "
                         r"id", reason), reason
    finally:
        recorded.served.stop()
